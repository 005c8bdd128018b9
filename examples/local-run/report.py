"""A tiny job: shows what a launchkit job sees (replica, results dir, argv), then writes a result file.

launchkit run --local --no-python --follow -- python3 examples/local-run/report.py hello "two words"
launchkit run --local --no-python --replicas 2 --follow -- python3 examples/local-run/report.py
"""

import json
import os
import socket
import sys
import time

env = os.environ
rank, count = int(env.get("BEAKER_REPLICA_RANK", "0")), int(env.get("BEAKER_REPLICA_COUNT", "1"))
print(
    f"replica {rank}/{count} on {socket.gethostname()}, leader {env.get('BEAKER_LEADER_REPLICA_HOSTNAME')}, "
    f"{env.get('BEAKER_ASSIGNED_GPU_COUNT', '0')} GPU(s)"
)
print(f"commit {env.get('LAUNCHKIT_GIT_COMMIT', '?')[:12]}, argv {sys.argv[1:]}")
for step in range(3):
    print(f"step {step}", flush=True)
    time.sleep(0.2)
results = env.get("RESULTS_DIR", ".")
with open(os.path.join(results, "metrics.json"), "w") as f:
    json.dump({"replica": rank, "steps": 3}, f)
print(f"wrote {results}/metrics.json")
