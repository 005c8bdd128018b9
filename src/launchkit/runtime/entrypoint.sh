# Main flow of the launchkit entrypoint: clone the exact commit, set up Python, exec the command.
# Inputs: LAUNCHKIT_* environment variables (see docs/runtime.md) and the user's argv as "$@".
set -euo pipefail

: "${LAUNCHKIT_GIT_REMOTE:?LAUNCHKIT_GIT_REMOTE is not set}"
: "${LAUNCHKIT_GIT_COMMIT:?LAUNCHKIT_GIT_COMMIT is not set}"
RESULTS_DIR=${RESULTS_DIR:-/results}
LAUNCHKIT_RUNTIME_DIR=${LAUNCHKIT_RUNTIME_DIR:-/launchkit-runtime}
export RESULTS_DIR PYTHONUNBUFFERED=${PYTHONUNBUFFERED:-1}
mkdir -p "$RESULTS_DIR" "$LAUNCHKIT_RUNTIME_DIR"
cd "$LAUNCHKIT_RUNTIME_DIR"

git init -q .
git fetch -q --depth 1 "$LAUNCHKIT_GIT_REMOTE" "$LAUNCHKIT_GIT_COMMIT" || lk_die 11 "could not fetch commit $LAUNCHKIT_GIT_COMMIT"
git -c advice.detachedHead=false checkout -q FETCH_HEAD

lk_cluster_setup
lk_wrap_command "$@"
exec "${LK_CMD[@]}"
