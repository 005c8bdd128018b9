"""A script written against gantry 3.7.0's Python API, as its users write them. The test runs it as is
with gantry and with its `gantry.` imports changed to `launchkit.gantry.` (nothing else differs).

Usage: script.py dry|launch|fail NAME"""

import sys

from beaker import Beaker, BeakerJob, BeakerWorkload
from gantry.api import Callback, Recipe, follow_workload
from gantry.exceptions import ExperimentFailedError, GantryError


class Events(Callback):
    def on_start(self, job):
        print("EVENT start", isinstance(job, BeakerJob), flush=True)

    def on_log(self, job, log_line, log_time):
        print("EVENT log", log_line.strip(), log_time > 0, flush=True)

    def on_success(self, job, *, metrics=None, results_ds=None):
        print("EVENT success", flush=True)

    def on_failure(self, job, *, metrics=None, results_ds=None):
        print("EVENT failure", job.status.exit_code, flush=True)


mode, name = sys.argv[1], sys.argv[2]
recipe = Recipe(
    args=["python", "train.py", "--lr", "0.1"],
    name=name,
    workspace="ai2/launchkit",
    budget="ai2/oe-default",
    yes=True,
    gpus=1,
    env_vars=[("MODE", mode)],
    callbacks=[Events()],
)

if mode == "dry":
    print("DRY", recipe.dry_run(), flush=True)
elif mode == "launch":
    with Beaker.from_env(check_for_upgrades=False) as beaker:
        workload = recipe.launch(client=beaker)
        print("WORKLOAD", isinstance(workload, BeakerWorkload), workload.experiment.name, flush=True)
        job = follow_workload(beaker, workload, callbacks=recipe.callbacks)
        print("FINISHED", isinstance(job, BeakerJob), "exit", job.status.exit_code, flush=True)
elif mode == "fail":
    try:
        recipe.launch(show_logs=True)
    except ExperimentFailedError as e:
        print("RAISED", type(e).__name__, isinstance(e, GantryError), "exit code 3" in str(e), flush=True)
    else:
        print("NOT RAISED", flush=True)
