"""A tiny "training" script: prints what it was given and writes a result file.

Run it through launchkit (from the repository root):
    launchkit run --dry-run -- python examples/hello/train.py --steps 3
"""

import argparse
import json
import os
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--message", default="hello from launchkit")
    args = ap.parse_args()
    loss = 1.0
    for step in range(1, args.steps + 1):
        loss *= 0.5
        print(f"step {step}/{args.steps} loss {loss:.4f}", flush=True)
        time.sleep(0.1)
    # A job's results directory; run plainly, results/ beside this script (ignored by git: .gitignore)
    here = os.path.dirname(os.path.abspath(__file__))
    results = os.environ.get("RESULTS_DIR") or os.path.join(here, "results")
    os.makedirs(results, exist_ok=True)
    with open(os.path.join(results, "metrics.json"), "w") as f:
        json.dump(
            {
                "loss": loss,
                "steps": args.steps,
                "message": args.message,
                "run_id": os.environ.get("LAUNCHKIT_RUN_ID"),
            },
            f,
        )
    print(f"{args.message}: final loss {loss:.4f}, metrics in {results}/metrics.json")


if __name__ == "__main__":
    main()
