"""A Ray driver: counts the nodes that joined and spreads a few tasks over them.

`launchkit run --ray` starts the Ray head on replica 0 and runs this there; the other replicas join as
workers and exit 0 when the head stops (see README.md).
"""

import socket

import ray


@ray.remote
def where(i: int) -> tuple[int, str]:
    return i * i, socket.gethostname()


def main() -> None:
    ray.init()  # RAY_ADDRESS is set by launchkit
    nodes = [n for n in ray.nodes() if n["Alive"]]
    results = ray.get([where.remote(i) for i in range(20)])
    print(
        f"driver sees {len(nodes)} nodes; sum of squares {sum(r for r, _ in results)}; "
        f"hosts {sorted({h for _, h in results})}",
        flush=True,
    )


if __name__ == "__main__":
    main()
