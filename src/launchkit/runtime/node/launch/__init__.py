"""The job's command (docs/runtime.md "Exec methods", docs/multi-node.md): the multi-node launchers
and the final exec (launchers.py), Ray's head and workers (ray_cluster.py), the watchdog that stays
the command's parent (watchdog.py), and child processes with their signals (procs.py)."""
