"""A learning-rate sweep launched from Python with launchkit's API (docs/api.md): one run per value,
each followed to its end, then every run's results downloaded and the best one named.

Run it from the root of your (committed and pushed) repository, with train.py there:

    python examples/python-api/sweep.py --lr 0.1 --lr 0.01 --lr 0.001            # on this machine
    python examples/python-api/sweep.py --backend beaker --gpus 1 --lr 0.1 ...   # on Beaker
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from launchkit import api
from launchkit.errors import LaunchkitError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lr", type=float, action="append", required=True, help="a learning rate (repeat)")
    parser.add_argument("--backend", choices=["local", "beaker"], default="local")
    parser.add_argument("--gpus", type=int, default=None)
    parser.add_argument("--results", default="sweep-results", help="where the results are downloaded")
    args = parser.parse_args(argv)

    here = args.backend == "local"
    options = {"local": True, "no_python": True} if here else {"gpus": args.gpus}
    runs = {}
    succeeded = []
    try:
        for lr in args.lr:  # launch them all first: they run side by side
            run = api.request(
                ["python3", "train.py", "--lr", str(lr)], name=f"sweep-lr-{lr}", **options
            ).launch()
            print(f"launched lr={lr}: {run.id}", file=sys.stderr)
            runs[lr] = run
        metrics = {}
        for lr, run in runs.items():
            follow = run.follow()
            for line in follow:
                print(f"[lr={lr}] {line}", end="")
            if follow.exit_code != 0:
                print(f"lr={lr}: {run.why()}", file=sys.stderr)
                continue
            succeeded.append(lr)
            for directory in run.results(str(Path(args.results) / run.id)):
                path = Path(directory) / "metrics.json"
                if path.is_file():
                    metrics[lr] = json.loads(path.read_text())
    except LaunchkitError as e:
        print(f"error: {e.one_line()}", file=sys.stderr)
        return e.exit_code
    for _lr, m in sorted(metrics.items()):
        print(json.dumps(m))
    if not metrics:
        if succeeded:  # they ended well but wrote nothing to compare
            print(
                f"{len(succeeded)} of {len(runs)} runs succeeded, none wrote metrics.json to its"
                " results directory ($RESULTS_DIR): nothing to compare",
                file=sys.stderr,
            )
        else:
            print(f"none of the {len(runs)} runs succeeded", file=sys.stderr)
        return 1
    best = min(metrics.values(), key=lambda m: m["loss"])
    print(f"best: lr={best['lr']} loss={best['loss']} ({len(metrics)} of {len(runs)} runs)", file=sys.stderr)
    return 0 if len(metrics) == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
