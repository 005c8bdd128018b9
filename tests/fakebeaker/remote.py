"""Admin API of a fake running in another process (`python -m fakebeaker`), and a small client for it.

GET  /__fake__/calls        -> {"calls": {method: n}, "total": n}
POST /__fake__/reset_calls
GET  /__fake__/env          -> {"env": {...}, "config": {...}}
POST /__fake__/call  {"target": "state"|"faults", "method": "finish_job", "args": [...], "kwargs": {...}}
     -> {"result": <id of the returned object, or the JSON value>}
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from typing import TYPE_CHECKING, Any

from timescale import scaled

if TYPE_CHECKING:
    from .server import FakeBeaker


def _jsonable(x: Any) -> Any:
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if hasattr(x, "id"):
        return x.id
    if hasattr(x, "name"):
        return x.name
    return repr(x)


def handle_admin(fake: FakeBeaker, method: str, path: str, body: dict) -> tuple[int, Any]:
    op = path.removeprefix("/__fake__/")
    if op == "calls" and method == "GET":
        with fake._calls_lock:
            calls = dict(fake.calls)
        return 200, {"calls": calls, "total": sum(calls.values())}
    if op == "reset_calls" and method == "POST":
        fake.reset_calls()
        return 200, {}
    if op == "env" and method == "GET":
        return 200, {"env": fake.env, "config": fake.config()}
    if op == "call" and method == "POST":
        target = {"state": fake.state, "faults": fake.faults}.get(body.get("target"))
        name = body.get("method", "")
        if target is None or name.startswith("_") or not callable(getattr(target, name, None)):
            return 400, {"message": f"no such admin call: {body.get('target')}.{name}"}
        return 200, {
            "result": _jsonable(getattr(target, name)(*body.get("args", []), **body.get("kwargs", {})))
        }
    return 404, {"message": f"unknown admin route {method} {path}"}


class RemoteFake:
    """Drive a fake in another process: `RemoteFake(admin_url, ca_file).state.finish_job(job_id, exit_code=3)`."""

    def __init__(self, admin_url: str, ca_file: str) -> None:
        self.admin_url = admin_url.rstrip("/")
        self._ctx = ssl.create_default_context(cafile=ca_file)
        self.state = _Proxy(self, "state")
        self.faults = _Proxy(self, "faults")

    def _request(self, method: str, op: str, body: dict | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"{self.admin_url}/{op}", data=data, method=method, headers={"Content-Type": "application/json"}
        )
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=self._ctx)
        )
        with opener.open(req, timeout=scaled(30)) as resp:
            return json.loads(resp.read() or b"{}")

    @property
    def calls(self) -> dict[str, int]:
        return self._request("GET", "calls")["calls"]

    @property
    def total_calls(self) -> int:
        return self._request("GET", "calls")["total"]

    def reset_calls(self) -> None:
        self._request("POST", "reset_calls", {})

    def env(self) -> dict[str, str]:
        return self._request("GET", "env")["env"]


class _Proxy:
    def __init__(self, remote: RemoteFake, target: str) -> None:
        self._remote, self._target = remote, target

    def __getattr__(self, name: str):
        def call(*args: Any, **kwargs: Any) -> Any:
            return self._remote._request(
                "POST", "call", {"target": self._target, "method": name, "args": list(args), "kwargs": kwargs}
            )["result"]

        return call
