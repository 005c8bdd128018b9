#!/usr/bin/env bash
# --upload and `launchkit results` without a Beaker account: the fake Beaker from the test suite, a
# throwaway repository with a local "remote", a data directory with an empty __init__.py, one 20 MB
# file and 200 small ones. The first launch uploads, the second reuses the dataset. Run from the
# repository root:   bash examples/upload-and-results/try.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
root=$PWD
dir=$(mktemp -d)
trap 'kill "$fake" 2>/dev/null || true; rm -rf "$dir"' EXIT
export HOME="$dir/home" && mkdir -p "$HOME"   # keep your real ~/.beaker out of it
PYTHONPATH=tests uv run python -m fakebeaker --auto --dir "$dir/fake" --format shell \
    --workspace ai2/launchkit >"$dir/env.sh" &
fake=$!
for _ in $(seq 100); do grep -q BEAKER_CONFIG "$dir/env.sh" 2>/dev/null && break; sleep 0.2; done
# shellcheck disable=SC1091
source "$dir/env.sh"
lk() { echo "+ launchkit $*" >&2; uv run --project "$root" launchkit "$@"; }

# a project to launch (committed and pushed to a local bare remote) and the data to upload
git init -q --bare "$dir/remote.git"
git init -q -b main "$dir/project" && cd "$dir/project"
echo 'print("hello")' >train.py && echo data/ >.gitignore
git add train.py .gitignore && git -c user.name=x -c user.email=x@x commit -qm init
git remote add origin "$dir/remote.git" && git push -q -u origin main
mkdir -p data/pkg data/small && : >data/pkg/__init__.py && truncate -s 20M data/big.bin
for i in $(seq 200); do echo "$i" >"data/small/$i.txt"; done

lk run --name first --upload data:/data --follow -- python train.py   # uploads (progress on a TTY)
lk run --name second --upload data:/data -- python train.py           # "unchanged, reusing dataset"
lk results first -o "$dir/results"                                     # the job's result dataset
