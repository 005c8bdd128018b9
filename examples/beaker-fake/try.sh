#!/usr/bin/env bash
# Try the Beaker commands without Beaker: start the fake server from the test suite, point launchkit at
# it, and run find-gpus / list / logs / follow / open / secret. Run from the repository root:
#   bash examples/beaker-fake/try.sh
# It waits for the fake to be ready (the first `uv run` may build the venv first), at most
# LAUNCHKIT_TRY_TIMEOUT seconds (default 300).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
dir=$(mktemp -d)
fake=
trap 'if [[ -n $fake ]]; then kill "$fake" 2>/dev/null || true; fi; rm -rf "$dir"' EXIT
export HOME="$dir/home"   # keep your real ~/.beaker out of it
mkdir -p "$HOME"
PYTHONPATH=tests uv run python -m fakebeaker --demo --log-lines 2000 --dir "$dir/fake" --format shell \
    --workspace ai2/launchkit >"$dir/env.sh" 2>"$dir/fake.log" &
fake=$!
# Ready when its last line is out: it prints its environment at once, when it is serving.
deadline=$((SECONDS + ${LAUNCHKIT_TRY_TIMEOUT:-300}))
until grep -q '^# admin: ' "$dir/env.sh" 2>/dev/null; do
    why=
    if ! kill -0 "$fake" 2>/dev/null; then
        why="the fake Beaker exited before it was ready"
    elif ((SECONDS >= deadline)); then
        why="the fake Beaker was not ready after ${LAUNCHKIT_TRY_TIMEOUT:-300}s (LAUNCHKIT_TRY_TIMEOUT)"
    fi
    if [[ -n $why ]]; then
        echo "try.sh: $why; its output:" >&2
        tail -n 20 "$dir/fake.log" >&2
        exit 1
    fi
    sleep 0.2
done
# shellcheck disable=SC1091
source "$dir/env.sh"
lk() { echo "+ launchkit $*" >&2; uv run launchkit "$@"; }

lk find-gpus --gpu-type h100
lk list --all --limit 5
exp=$(uv run launchkit open alice/follow-200k)   # no TTY: prints the URL
echo "$exp"
lk logs "${exp##*/}" --tail 3
lk follow "${exp##*/}" | tail -n 2
echo "a-secret-value" | lk secret set MY_TOKEN
lk secret list
