"""OLMo-core's own Beaker launcher (olmo_core.launch.beaker from the published ai2-olmo-core, in its own
venv: .ci/install-olmo-core), run as its users run it. Nothing of OLMo-core is copied: its environment
is put on the path after this interpreter's own, and with `launchkit`, its `gantry.` imports are pointed
at `launchkit.gantry.` by entries in sys.modules (with `gantry`, the real gantry 3.7.0 answers them).

Usage: olmo_core_launch.py OLMO_SITE_PACKAGES gantry|launchkit dry|launch NAME"""

import importlib
import sys

site, tool, mode, name = sys.argv[1:5]
sys.path.append(site)
if tool == "launchkit":
    sys.modules["gantry"] = importlib.import_module("launchkit.gantry")
    for sub in ("api", "callbacks", "exceptions"):
        sys.modules[f"gantry.{sub}"] = importlib.import_module(f"launchkit.gantry.{sub}")

from beaker import BeakerWorkload
from olmo_core.launch.beaker import BeakerEnvVar, BeakerLaunchConfig

config = BeakerLaunchConfig(
    name=name,
    cmd=["train.py", "--steps", "2"],
    budget="ai2/oe-default",
    workspace="ai2/launchkit",
    beaker_image="alice/base",
    num_gpus=0,
    clusters=["ai2/jupiter"],
    env_vars=[BeakerEnvVar(name="MODE", value=mode)],
)
print("GANTRY FROM", sys.modules["gantry.api"].__name__, flush=True)
if mode == "dry":
    config.dry_run()
    print("DRY DONE", flush=True)
else:
    workload = config.launch(follow=True)
    print("WORKLOAD", isinstance(workload, BeakerWorkload), workload.experiment.name, flush=True)
