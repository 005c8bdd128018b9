# Shared helpers for the launchkit entrypoint. Functions only: nothing runs at source time.

lk_log() { printf '[launchkit] %s\n' "$*" >&2; }
lk_die() { # lk_die EXIT_CODE MESSAGE...
    local code=$1; shift
    printf '[launchkit] error: %s\n' "$*" >&2
    exit "$code"
}
