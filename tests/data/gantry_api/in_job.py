"""What a gantry job calls from inside itself (gantry's README: `gantry.api.write_metrics()`), and
`update_workload_description`; run with gantry, and with `gantry.` imports changed to
`launchkit.gantry.`. BEAKER_WORKLOAD_ID and RESULTS_DIR are the job's, as Beaker sets them."""

from gantry.api import update_workload_description, write_metrics

write_metrics({"loss": 0.25, "step": 3})
print("DESC", update_workload_description("[step 3]", strategy="append"), flush=True)
print("DESC", update_workload_description("[step 4]", strategy="append"), flush=True)
print("DESC", update_workload_description("first:", strategy="prepend"), flush=True)
