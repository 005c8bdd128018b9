"""A stand-in training script for a sweep: reads its hyperparameters from argv and from the
LAUNCHKIT_SWEEP_* variables each task of `launchkit run --sweep ...` gets, and prints one line."""

import argparse
import json
import os

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, required=True)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

prefix = "LAUNCHKIT_SWEEP_"
swept = {k.removeprefix(prefix).lower(): v for k, v in os.environ.items() if k.startswith(prefix)}
loss = round(1.0 / (1.0 + 1000 * args.lr) + args.seed * 0.001, 4)  # a pretend result
task = os.environ.get("LAUNCHKIT_TASK_NAME", "main")
print(json.dumps({"task": task, "lr": args.lr, "seed": args.seed, "env": swept, "loss": loss}))
