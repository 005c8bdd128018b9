"""Run a fake Beaker server as a process (for benchmarks and manual use).

    PYTHONPATH=tests uv run python -m fakebeaker --demo --latency 0.02 [--format shell]

Prints one JSON line (or `export` lines with --format shell) with the environment to use, then serves
until SIGTERM/SIGINT (or until stdin closes, with --exit-on-eof).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import threading


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m fakebeaker", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--scenario", default="basic", help="basic (default), demo or empty")
    p.add_argument("--demo", action="store_true", help="same as --scenario demo")
    p.add_argument("--state", metavar="FILE", help="scenario YAML file (see README.md)")
    p.add_argument("--clusters", type=int, default=40, help="demo: extra clusters")
    p.add_argument("--workloads", type=int, default=200, help="demo: workloads both tools recognise")
    p.add_argument("--other-workloads", type=int, default=20, help="demo: workloads of neither tool")
    p.add_argument("--log-lines", type=int, default=200_000, help="demo: lines of the follow-200k job")
    p.add_argument("--latency", type=float, default=0.0, help="seconds added to every call")
    p.add_argument("--user", help="user whose token goes into the config (default: first user)")
    p.add_argument("--workspace", help="default workspace in the config")
    p.add_argument("--dir", help="directory for the config file and certificates (default: a temp dir)")
    p.add_argument("--format", choices=["json", "shell"], default="json")
    p.add_argument("--auto", action="store_true", help="run new jobs automatically (start, log, exit 0)")
    p.add_argument("--exit-on-eof", action="store_true", help="stop when stdin is closed")
    p.add_argument(
        "--option",
        "-o",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a behaviour switch (state.Options), e.g. -o auth_error=permission_denied; also "
        "FAKEBEAKER_OPTIONS='{\"key\": value}'",
    )
    args = p.parse_args(argv)

    from . import scenarios
    from .server import FakeBeaker
    from .state import AutoRun, Options, State
    from .tls import tls_material

    if args.dir:
        tls_material(args.dir)
    raw = json.loads(os.environ.get("FAKEBEAKER_OPTIONS") or "{}")
    raw.update(dict(o.split("=", 1) for o in args.option))
    state = State(options=Options.parse(raw))
    opts: dict = {}
    name = "demo" if args.demo else args.scenario
    if args.state:
        opts = scenarios.load_yaml(args.state, state)
    elif name == "demo":
        scenarios.demo(
            state,
            clusters=args.clusters,
            workloads=args.workloads,
            other_workloads=args.other_workloads,
            log_lines=args.log_lines,
        )
    else:
        scenarios.build(name, state)
    if args.auto:
        state.set_auto(AutoRun())
    fake = FakeBeaker(
        state,
        directory=args.dir,
        default_user=args.user or opts.get("default_user"),
        default_workspace=args.workspace or opts.get("default_workspace"),
    )
    if args.dir:
        fake.tls = tls_material(args.dir)
    latency = args.latency or float(opts.get("latency", 0.0))
    if latency:
        fake.faults.latency(latency)
    fake.start()
    env = fake.env
    if args.format == "shell":
        for k, v in env.items():
            print(f"export {k}={shlex.quote(v)}")
        print(f"# github.com for gantry run: export HTTPS_PROXY={fake.github_proxy}")
        print(f"# admin: {fake.admin_url}  (stop with kill {os.getpid()})")
    else:
        print(
            json.dumps(
                {
                    "env": env,
                    "config": fake.config(),
                    "rpc_address": fake.rpc_address,
                    "agent_address": fake.agent_address,
                    "admin_url": fake.admin_url,
                    "github_proxy": fake.github_proxy,
                    "ca_file": str(fake.tls.ca_file),
                    "pid": os.getpid(),
                }
            )
        )
    sys.stdout.flush()

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    if args.exit_on_eof:

        def watch() -> None:
            sys.stdin.read()
            done.set()

        threading.Thread(target=watch, daemon=True).start()
    done.wait()
    fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
