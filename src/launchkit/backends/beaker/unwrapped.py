"""beaker-py's private API, in one place.

beaker-py 2.8.1's high-level clients do not wrap every RPC launchkit needs (GetBudget, ListJobEvents,
GetEffectiveEntityAllocation, ListEffectiveAllocations), and its log streaming's error mapping is not
public. Those calls go through here: the generated stub of a beaker-py client (`client.service.<RPC>`)
sent by beaker-py's own `rpc_request` (its credentials, retries and error mapping), whose wrapper
class `RpcMethod` is private, and `coerce_rpc_error`, which maps a gRPC error as beaker-py does.
"""

from __future__ import annotations

from typing import Any

from beaker._service_client import RpcMethod, coerce_rpc_error

__all__ = ["coerce_rpc_error", "rpc"]


def rpc(client: Any, name: str, response: Any, request: Any) -> Any:
    """RPC `name` of beaker-py client `client`'s service (its stub), answered with `response`'s type."""
    return client.rpc_request(RpcMethod[response](getattr(client.service, name)), request)
