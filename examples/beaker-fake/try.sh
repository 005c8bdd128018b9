#!/usr/bin/env bash
# Try the Beaker commands without Beaker: start the fake server from the test suite, point launchkit at
# it, and run find-gpus / list / logs / follow / open / secret. Run from the repository root:
#   bash examples/beaker-fake/try.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
dir=$(mktemp -d)
trap 'kill "$fake" 2>/dev/null || true; rm -rf "$dir"' EXIT
export HOME="$dir/home"   # keep your real ~/.beaker out of it
mkdir -p "$HOME"
PYTHONPATH=tests uv run python -m fakebeaker --demo --log-lines 2000 --dir "$dir/fake" --format shell \
    --workspace ai2/launchkit > "$dir/env.sh" &
fake=$!
for _ in $(seq 100); do grep -q BEAKER_CONFIG "$dir/env.sh" 2>/dev/null && break; sleep 0.2; done
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
