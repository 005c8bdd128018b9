"""launchkit vs gantry 3.7.0 against the same fake Beaker server (run as a separate process).

    uv run python bench/beaker_vs_gantry.py [--repeat 3] [--only find-gpus,list,follow]

- find-gpus: 40 extra clusters (the `demo` scenario), 20 ms added latency on every call.
  Target: launchkit wall time <= 0.3x gantry's.
- list: 200 workloads (each tool recognises all of them as its own). Target: <= 0.2x gantry's wall time
  and <= 1/10 of its RPC count (counted by the fake server).
- follow: a finished job with 200k log lines, stdout to a pipe. Target: >= 3x gantry's lines/s; peak
  memory (max RSS) flat: following 200k lines costs about what printing 1k lines costs.
- first-line: `follow` of a running job, 20 ms added latency per call: time from start to the first
  log line, and the calls made before it (issue 13 item 4). Target: <= 2 round trips before the
  stream. Process start-up is in both tools' times.

gantry is installed into its own venv (bench/results/gantry-venv, via uv) on first use; its upgrade
checks are off (GANTRY_CHECK_FOR_UPGRADES=0 and a fresh beaker-py version-check stamp). `gantry run`
is left out (it asks github.com about the repository). Results also go to bench/results/beaker.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_startup import GANTRY_VENV, gantry_bin  # one gantry 3.7.0 venv for every bench

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
MARKER = "[launchkit]"


def compile_all(python: Path | str) -> None:
    """PYTHONDONTWRITEBYTECODE is set here: byte-compile so neither tool pays for compiling at start-up."""
    code = (
        "import site, compileall, sys; [compileall.compile_dir(p, quiet=2) for p in site.getsitepackages()]"
    )
    subprocess.run([str(python), "-c", code], check=False, timeout=900)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src")], check=False, timeout=900)


class Fake:
    """`python -m fakebeaker --demo` in its own process, driven through its admin API."""

    # One directory (so one CA) for every fake of a run: grpc reads the CA path once per process.
    DIR = tempfile.mkdtemp(prefix="lk-bench-fake-")

    def __init__(self, latency: float = 0.0):
        self.dir = self.DIR
        env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fakebeaker",
                "--demo",
                "--dir",
                self.dir,
                "--workspace",
                "ai2/launchkit",
                "--exit-on-eof",
            ]
            + (["--latency", str(latency)] if latency else []),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        info = json.loads(self.proc.stdout.readline())
        self.env = info["env"]
        sys.path.insert(0, str(ROOT / "tests"))
        from fakebeaker.remote import RemoteFake

        self.remote = RemoteFake(info["admin_url"], info["ca_file"])

    def mark_launchkit_workloads(self) -> None:
        """The demo's workloads carry GANTRY_VERSION and LAUNCHKIT_VERSION (each tool lists all of them);
        launchkit recognises its own by the marker it puts in the description, so add that."""
        from beaker import Beaker
        from beaker.config import Config

        cfg = json.loads(json.dumps(self.remote._request("GET", "env")["config"]))
        os.environ.update(
            {k: v for k, v in self.env.items() if k.startswith(("GRPC_", "REQUESTS_", "NO_", "no_"))}
        )
        with Beaker(Config(**cfg), check_for_upgrades=False) as b:
            b.MAX_RETRIES = 2  # type: ignore[misc]
            for wl in b.workload.list(workspace="ai2/launchkit", limit=1000):
                name = wl.experiment.name
                if name.startswith("bench-") or name == "follow-200k":
                    b.workload.update(wl, description=f"{wl.experiment.description} {MARKER}")

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def run(
    cmd: list[str], env: dict[str, str], cwd: str, keep: Path | None = None
) -> tuple[float, int, int, int]:
    """(wall seconds, exit code, max RSS in KiB, stdout lines) of one process, stdout through a pipe."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    lines = 0
    kept = bytearray()
    assert p.stdout is not None
    for chunk in iter(lambda: p.stdout.read(1 << 16), b""):
        lines += chunk.count(b"\n")
        if keep is not None and len(kept) < 1 << 20:
            kept += chunk
    if keep is not None:
        keep.write_bytes(bytes(kept))
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, p.returncode, usage.ru_maxrss, lines


def tool_env(fake: Fake, home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BEAKER_", "LAUNCHKIT_", "GANTRY_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(fake.env, HOME=home, GANTRY_CHECK_FOR_UPGRADES="0", COLUMNS="200", NO_COLOR="1")
    beaker_dir = Path(home) / ".beaker"
    beaker_dir.mkdir(parents=True, exist_ok=True)
    (beaker_dir / ".beaker-py.json").write_text(json.dumps({"version_checked": time.time() + 86400}))
    return env


def measure(name: str, cmd: list[str], fake: Fake, env: dict[str, str], cwd: str, repeat: int) -> dict:
    if repeat > 1:
        run(cmd, env, cwd)  # warm-up (page cache, launchkit's user-name cache), not counted
    runs = []
    for _ in range(repeat):
        fake.remote.reset_calls()
        wall, code, rss, lines = run(cmd, env, cwd, RESULTS / (name.replace(" ", "_") + ".out"))
        runs.append(
            {"wall": wall, "code": code, "rss_kib": rss, "lines": lines, "rpcs": fake.remote.total_calls}
        )
    best = min(runs, key=lambda r: r["wall"])
    out = {
        "name": name,
        "cmd": " ".join(cmd[-4:]),
        "wall_s": round(statistics.median(r["wall"] for r in runs), 3),
        "best_s": round(best["wall"], 3),
        "exit": best["code"],
        "max_rss_mib": round(best["rss_kib"] / 1024, 1),
        "stdout_lines": best["lines"],
        "rpcs": best["rpcs"],
    }
    print(
        f"  {name:<28} {out['wall_s']:>8.3f}s  rpcs={out['rpcs']:<5} rss={out['max_rss_mib']:>6} MiB  "
        f"lines={out['stdout_lines']}  exit={out['exit']}",
        flush=True,
    )
    return out


def first_line(cmd: list[str], fake: Fake, env: dict[str, str], cwd: str, text: bytes) -> dict:
    """Seconds until `text` appears on stdout, and the fake's calls made by then; then stop it."""
    fake.remote.reset_calls()
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert p.stdout is not None
    try:
        for line in p.stdout:
            if text in line:
                break
        wall = time.perf_counter() - t
        calls = fake.remote.calls
    finally:
        p.terminate()
        p.wait(10)
    return {"first_line_s": round(wall, 3), "calls_before": calls, "rpcs_before": sum(calls.values())}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default="find-gpus,list,follow,first-line")
    args = ap.parse_args()
    only = set(args.only.split(","))
    gantry = str(gantry_bin())
    compile_all(GANTRY_VENV / "bin" / "python")
    compile_all(sys.executable)
    lk = [sys.executable, "-m", "launchkit"]
    cwd = tempfile.mkdtemp(prefix="lk-bench-cwd-")  # no pyproject.toml for gantry to read
    home = tempfile.mkdtemp(prefix="lk-bench-home-")
    results: dict[str, dict] = {}

    if "find-gpus" in only:
        print("find-gpus: 40 extra clusters, 20 ms latency per call")
        fake = Fake(latency=0.02)
        try:
            env = tool_env(fake, home)
            g = measure("gantry find-gpus", [gantry, "find-gpus"], fake, env, cwd, args.repeat)
            k = measure("launchkit find-gpus", lk + ["find-gpus"], fake, env, cwd, args.repeat)
            results["find-gpus"] = {"gantry": g, "launchkit": k, "ratio": round(k["wall_s"] / g["wall_s"], 3)}
        finally:
            fake.close()

    if "list" in only:
        print("list: 200 workloads, 20 ms latency per call")
        fake = Fake(latency=0.02)
        try:
            fake.mark_launchkit_workloads()
            env = tool_env(fake, home)
            g = measure("gantry list (20ms)", [gantry, "list", "--limit", "200"], fake, env, cwd, 1)
            k = measure("launchkit list (20ms)", lk + ["list", "--limit", "200"], fake, env, cwd, args.repeat)
            results["list-20ms"] = {
                "gantry": g,
                "launchkit": k,
                "ratio": round(k["wall_s"] / g["wall_s"], 3),
                "rpc_ratio": round(k["rpcs"] / max(1, g["rpcs"]), 3),
            }
        finally:
            fake.close()

    if "list" in only or "follow" in only:
        fake = Fake()
        try:
            fake.mark_launchkit_workloads()
            env = tool_env(fake, home)
            if "list" in only:
                print("list: 200 workloads, no added latency")
                g = measure("gantry list", [gantry, "list", "--limit", "200"], fake, env, cwd, args.repeat)
                k = measure("launchkit list", lk + ["list", "--limit", "200"], fake, env, cwd, args.repeat)
                results["list"] = {
                    "gantry": g,
                    "launchkit": k,
                    "ratio": round(k["wall_s"] / g["wall_s"], 3),
                    "rpc_ratio": round(k["rpcs"] / max(1, g["rpcs"]), 3),
                }
            if "follow" in only:
                print("follow: 200k lines")
                exp = fake.remote.state.find_experiment("alice/follow-200k")
                g = measure("gantry follow", [gantry, "follow", exp], fake, env, cwd, 1)
                k = measure("launchkit follow", lk + ["follow", exp], fake, env, cwd, args.repeat)
                small = measure(
                    "launchkit logs --head 1000", lk + ["logs", exp, "--head", "1000"], fake, env, cwd, 1
                )
                n = 200_000
                results["follow"] = {
                    "gantry": g,
                    "launchkit": k,
                    "launchkit_head_1000": small,
                    "gantry_lines_per_s": round(n / g["wall_s"]),
                    "launchkit_lines_per_s": round(n / k["wall_s"]),
                    "speedup": round(g["wall_s"] / k["wall_s"], 2),
                    "rss_growth_mib_200k_vs_1k": round(k["max_rss_mib"] - small["max_rss_mib"], 1),
                }
        finally:
            fake.close()

    if "first-line" in only:
        print("first-line: follow a running job, 20 ms latency per call")
        fake = Fake(latency=0.02)
        try:
            env = tool_env(fake, home)
            exp = fake.remote.state.add_experiment("ai2/launchkit", "live", author="alice")
            fake.remote.state.start_job(exp)
            fake.remote.state.append_logs(exp, ["first line of the live job"])
            mark = b"first line of the live job"
            first_line(lk + ["follow", exp], fake, env, cwd, mark)  # warm-up (user-name cache)
            g = [first_line([gantry, "follow", exp], fake, env, cwd, mark) for _ in range(args.repeat)]
            k = [first_line(lk + ["follow", exp], fake, env, cwd, mark) for _ in range(args.repeat)]
            med = lambda runs: statistics.median(r["first_line_s"] for r in runs)  # noqa: E731
            results["first-line"] = {
                "gantry": {"first_line_s": med(g), "calls_before": g[-1]["calls_before"]},
                "launchkit": {"first_line_s": med(k), "calls_before": k[-1]["calls_before"]},
                "ratio": round(med(k) / med(g), 3),
            }
        finally:
            fake.close()

    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "beaker.json").write_text(json.dumps(results, indent=2))
    print(
        json.dumps(
            {k: {x: v for x, v in r.items() if not isinstance(v, dict)} for k, r in results.items()}, indent=2
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
