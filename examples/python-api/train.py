"""A stand-in training run: takes a learning rate, prints a few steps and writes its final metrics to
$RESULTS_DIR/metrics.json (the job's results directory, which `Run.results()` downloads)."""

import argparse
import json
import os
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, required=True)
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()

loss = 1.0
for step in range(1, args.steps + 1):
    loss = round(loss / (1.0 + 100 * args.lr), 6)  # a pretend optimisation
    print(f"step={step} lr={args.lr} loss={loss}", flush=True)

results = Path(os.environ.get("RESULTS_DIR", "results"))
results.mkdir(parents=True, exist_ok=True)
(results / "metrics.json").write_text(json.dumps({"lr": args.lr, "loss": loss}))
