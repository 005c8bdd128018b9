# Multi-node launchers (torchrun, accelerate, ray). Owned by the multi-node work.
# Contract: lk_wrap_command "$@" fills the global array LK_CMD with the final argv to exec.

lk_wrap_command() { LK_CMD=("$@"); }
