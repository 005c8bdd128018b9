"""What a local run leaves that must not outlive it: the credential files its entrypoint wrote
(`--aws-credentials-secret` and the like, under replica-N/runtime/credentials/, and a retry's under
replica-N/attempt-K/runtime/credentials/)."""

from __future__ import annotations

import os

CREDENTIALS = os.path.join("runtime", "credentials")


def remove_credentials(rdir: str | os.PathLike[str]) -> None:
    """Remove every replica's credential files (called once nothing of the run is left running)."""
    try:
        names = os.listdir(rdir)
    except OSError:
        return
    for name in names:
        if name.startswith("replica-"):
            replica = os.path.join(rdir, name)
            _remove(os.path.join(replica, CREDENTIALS))
            try:
                retries = [n for n in os.listdir(replica) if n.startswith("attempt-")]
            except OSError:
                continue
            for attempt in retries:
                _remove(os.path.join(replica, attempt, CREDENTIALS))


def _remove(path: str) -> None:
    if os.path.islink(path):
        os.unlink(path)  # a link the job planted: its target is not ours to delete
    elif os.path.isdir(path):
        import shutil

        shutil.rmtree(path, ignore_errors=True)
