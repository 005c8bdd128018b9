"""Issue 11, items 3-5: one error boundary for every path.

Every failure is one line on stderr (`error: ...`) naming the value and the fix, with exit 2 (usage) or
3 (precondition); -v adds detail but never changes the exit code; a traceback only with LAUNCHKIT_DEBUG=1.
In-process (tests/inproc.py) where the behaviour allows; subprocesses where real file descriptors matter.
"""

from __future__ import annotations

import io
import math
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_cli
from inproc import run_main
from lk_helpers import unreachable_beaker_config

CMD = ["--", "python", "train.py"]
HF = "hf_" + "a1B2c3D4e5" * 3  # token-shaped values (fake)
GHP = "ghp_" + "Z9y8X7w6V5" * 4


def one_line(r, code: int, *needles: str) -> str:
    """The run failed with `code` and exactly one `error:` line on stderr containing every needle."""
    assert r.code == code, (r.code, r.stdout[-500:], r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = [x for x in r.stderr.strip().splitlines() if not x.startswith("plan: ")]  # said first
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# -- input that got through ------------------------------------------------------------------------

NUMERIC = [
    ("cpus-inf", ["--cpus", "inf"], "--cpus"),
    ("cpus-overflow-to-inf", ["--cpus", "1e400"], "--cpus"),
    ("cpus-nan", ["--cpus", "nan"], "--cpus"),
    ("cpus-huge", ["--cpus", "1e300"], "--cpus"),
    ("cpus-tiny", ["--cpus", "1e-300"], "--cpus 1e-300: is too small (at least 0.001)"),
    ("gpus-huge", ["--gpus", "99999999999999999999999"], "--gpus"),
    ("gpus-float-notation", ["--gpus", "1e23"], "--gpus"),
    ("replicas-huge", ["--replicas", "99999999999"], "--replicas"),
    ("retries-huge", ["--retries", "99999999999999999999"], "--retries"),
    ("task-timeout-int64-overflow", ["--task-timeout", "99999999999999d"], "--task-timeout"),
    ("task-timeout-digits-to-inf", ["--task-timeout", "9" * 400], "--task-timeout"),
    ("min-runtime-overflow", ["--min-runtime", "99999999999999w"], "--min-runtime"),
    ("sync-start-overflow", ["--synchronized-start-timeout", "9999999999999d"], "--synchronized-start"),
    ("memory-uint64-overflow", ["--memory", "99999999999999PiB"], "--memory"),
    ("shared-memory-digits-to-inf", ["--shared-memory", "9" * 400], "--shared-memory"),
]


@pytest.mark.parametrize("args,flag", [pytest.param(a, f, id=i) for i, a, f in NUMERIC])
def test_numeric_edges_are_refused(repo, args, flag):
    r = run_main("run", "--dry-run", *args, *CMD, cwd=repo.path)
    one_line(r, 2, flag)
    assert r.stdout == ""


@pytest.mark.parametrize(
    "body,key",
    [
        ("cpus = inf\n", "'cpus'"),
        ("cpus = nan\n", "'cpus'"),
        ("gpus = 99999999999\n", "'gpus'"),
        ("task_timeout = nan\n", "'task_timeout'"),
        ("task_timeout = inf\n", "'task_timeout'"),
        ("min_runtime = 1e300\n", "'min_runtime'"),
        ('memory = "99999999999999PiB"\n', "'memory'"),
    ],
)
def test_numeric_edges_in_config_name_the_key(repo, body, key):
    repo.commit({"pyproject.toml": "[tool.launchkit]\n" + body})
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    one_line(r, 2, key, "pyproject.toml")


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--docker-image", ""], "--docker-image ''"),
        (["--beaker-image", " "], "--beaker-image ' '"),
        (["--docker-image", "python 3.12"], "--docker-image"),
    ],
)
def test_empty_image_is_not_the_default(repo, args, needle):
    one_line(run_main("run", "--dry-run", *args, *CMD, cwd=repo.path), 2, needle)


@pytest.mark.parametrize("command", [["  "], ["\t", "x"], [" \n "]])
def test_whitespace_only_command_is_refused(repo, command):
    one_line(run_main("run", "--dry-run", "--", *command, cwd=repo.path), 2, "empty", "after `--`")


@pytest.mark.parametrize(
    "args,flag",
    [
        (["list", "--local", "--limit", "99999999999999999999"], "--limit"),
        (["logs", "--local", "--replica", "-1", "local-x"], "--replica"),
        (["logs", "--local", "--tail", "99999999999999999999", "local-x"], "--tail"),
        (["follow", "--local", "--replica", "99999999999", "local-x"], "--replica"),
    ],
)
def test_observe_command_numbers_are_bounded(args, flag):
    one_line(run_main(*args), 2, flag)


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "1e300"])
def test_beaker_timeout_is_checked_for_every_command(value):
    one_line(run_main("--beaker-timeout", value, "list", "--local"), 2, "--beaker-timeout")


@pytest.mark.parametrize("raw", ["nan", "inf", "1e400"])
def test_beaker_timeout_from_config_must_be_finite(tmp_path, raw):
    cfg = tmp_path / "user.toml"
    cfg.write_text(f"beaker_timeout = {raw}\n")
    r = run_main("list", env={"LAUNCHKIT_CONFIG": str(cfg), "BEAKER_TOKEN": "t"})
    one_line(r, 2, "'beaker_timeout'", str(cfg))
    one_line(r, 2, "beaker_timeout")


# -- numeric parsers: properties -------------------------------------------------------------------


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(), st.text(max_size=30)))
def test_durations_fit_beaker_or_are_refused(value):
    from launchkit.core.units import MAX_SECONDS, UnitError, parse_duration, to_nanoseconds

    try:
        seconds = parse_duration(value)
    except UnitError:
        return
    assert math.isfinite(seconds) and 0 <= seconds <= MAX_SECONDS
    assert 0 <= to_nanoseconds(seconds) < 2**63


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.integers(),
        st.text(max_size=30),
        st.from_regex(r"\d{1,400}(\.\d{1,5})?\s?([kmgtpKMGTP]i?[bB]?)?", fullmatch=True),
    )
)
def test_sizes_fit_beaker_or_are_refused(value):
    from launchkit.core.units import UnitError, parse_size

    try:
        size = parse_size(value)
    except UnitError:
        return
    assert 0 < size < 2**64


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=-(2**70))))
def test_counts_fit_beaker_or_are_refused(value):
    from launchkit.core.parse import build_request
    from launchkit.errors import UsageError

    for opt in ("cpus", "gpus", "replicas", "retries"):
        try:
            req = build_request({opt: value}, ["python"])
        except UsageError:
            continue
        got = getattr(req, opt)
        assert math.isfinite(got) and 0 <= got < 2**32
        assert opt != "cpus" or got >= 0.001  # Beaker counts thousandths of a CPU


NUMERIC_OPTIONS = [
    "--cpus",
    "--gpus",
    "--memory",
    "--shared-memory",
    "--task-timeout",
    "--min-runtime",
    "--synchronized-start-timeout",
    "--replicas",
    "--retries",
]
NUMBER_TEXT = st.one_of(
    st.sampled_from(["inf", "-inf", "nan", "1e400", "1e23", "-0", "0x10", "1_000", "9" * 40, "1e-400"]),
    st.from_regex(r"-?\d{1,30}(\.\d{1,5})?([eE][+-]?\d{1,4})?([a-zA-Z]{1,3})?", fullmatch=True),
    st.text(max_size=12),
)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(opt=st.sampled_from(NUMERIC_OPTIONS), value=NUMBER_TEXT)
def test_any_number_is_accepted_or_one_line(repo, opt, value):
    r = run_main("run", "--dry-run", f"{opt}={value}", *CMD, cwd=repo.path)
    assert r.code in (0, 2), (opt, value, r.code, r.stderr)
    assert "Traceback" not in r.stderr
    if r.code == 2:
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: "), r.stderr


# -- write errors ----------------------------------------------------------------------------------


def _to_dev_full(*args: str, cwd=None, env=None) -> tuple[int, str]:
    with open("/dev/full", "w") as full:
        p = subprocess.run(
            [sys.executable, "-m", "launchkit", *args],
            cwd=cwd,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env={**os.environ, **(env or {})},
        )
    return p.returncode, p.stderr


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize(
    "args",
    [
        ["run", "--dry-run", *CMD],
        ["list", "--local", "--json"],
        ["list", "--local"],
        ["profiles"],
        ["-v", "run", "--dry-run", *CMD],
    ],
    ids=["dry-run", "list-json", "list-table", "profiles", "dry-run-verbose"],
)
def test_stdout_on_a_full_disk_is_one_line(repo, args):
    code, err = _to_dev_full(*args, cwd=repo.path)
    assert code == 3, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert errors == [errors[0]] and "cannot write the output" in errors[0], err
    assert "No space left on device" in errors[0]


def _readonly_dir(tmp_path):
    if os.geteuid() == 0:  # root writes through permission bits; /sys refuses everyone
        return "/sys/launchkit-test-logs/"
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    return str(d / "out.log")


def test_logs_output_write_errors(fake_beaker, tmp_path):
    exp = fake_beaker.state.add_experiment("ai2/launchkit", "logged", author="alice")
    fake_beaker.state.append_logs(exp.tasks[0].latest_job, [b"line"])
    fake_beaker.state.finish_job(exp.tasks[0].latest_job, 0)
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for target in (
        str(tmp_path / "missing" / "out.log"),
        str(a_file / "out.log"),
        str(a_file / "dir") + os.sep,
        _readonly_dir(tmp_path),
    ):
        r = run_main("logs", exp.id, "-o", target)
        one_line(r, 3, f"--output {target!r}")


# -- -v adds detail, never a different exit code ------------------------------------------------


def test_verbose_keeps_the_dirty_tree_exit_code(repo):
    (repo.path / "train.py").write_text("changed\n")
    for flags in ([], ["-v"], ["-vv"]):
        r = run_main(*flags, "run", "--dry-run", *CMD, cwd=repo.path)
        assert r.code == 3, r.stderr
        assert "Traceback" not in r.stderr and r.stderr.startswith("error: "), r.stderr
    assert "debug: " in r.stderr  # -v adds detail


@pytest.mark.parametrize(
    "args,code",
    [
        (["follow", "local-does-not-exist"], 4),
        (["logs", "--local", "local-does-not-exist"], 4),
        (["run", "--gpus", "-1", *CMD], 2),
        (["list", "--backend", "beaker"], 3),  # no Beaker credentials
    ],
)
def test_verbose_keeps_the_exit_code(repo, args, code):
    quiet = run_main(*args, cwd=repo.path)
    loud = run_main("-v", *args, cwd=repo.path)
    assert quiet.code == loud.code == code, (quiet.stderr, loud.stderr)
    assert "Traceback" not in loud.stderr
    assert loud.stderr.splitlines()[0] == quiet.stderr.splitlines()[0]


@pytest.mark.slow
def test_verbose_keeps_the_unreachable_exit_code(tmp_path):
    cfg = unreachable_beaker_config(tmp_path)
    r = run_cli("-v", "--beaker-timeout", "2", "list", env={"BEAKER_CONFIG": str(cfg)}, timeout=60)
    assert r.code == 5, r.stderr
    assert "Traceback" not in r.stderr and "did not answer" in r.stderr


def test_traceback_only_with_launchkit_debug(repo):
    r = run_main("follow", "local-does-not-exist", env={"LAUNCHKIT_DEBUG": "1"})
    assert r.code == 4 and "Traceback" in r.stderr and "error: no local run" in r.stderr


def test_a_bug_is_one_line_with_its_own_exit_code(monkeypatch):
    import launchkit.cli.list_body as list_body

    def broken(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(list_body, "choose_listing", broken)
    r = run_main("list", "--local")
    line = one_line(r, 70, "internal error", "RuntimeError: boom", "LAUNCHKIT_DEBUG=1")
    assert "\n" not in line
    r = run_main("list", "--local", env={"LAUNCHKIT_DEBUG": "1"})
    assert r.code == 70 and "Traceback" in r.stderr


# -- environment values ----------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["run", "--dry-run", *CMD], ["list"]])
def test_launchkit_config_pointing_nowhere_is_an_error(repo, tmp_path, args):
    r = run_main(*args, cwd=repo.path, env={"LAUNCHKIT_CONFIG": str(tmp_path / "nope.toml")})
    one_line(r, 2, "LAUNCHKIT_CONFIG", "nope.toml")


@pytest.mark.parametrize(
    "var,value,args",
    [
        ("LAUNCHKIT_BACKEND", "slurm", ["list"]),
        ("LAUNCHKIT_BACKEND", "slurm", ["run", "--dry-run", *CMD]),
        ("LAUNCHKIT_BEAKER_TIMEOUT", "nan", ["list"]),
        ("LAUNCHKIT_PRIORITY", "asap", ["run", "--dry-run", *CMD]),
        ("LAUNCHKIT_DOCKER_IMAGE", "python 3", ["run", "--dry-run", *CMD]),
    ],
)
def test_bad_environment_values_name_the_variable(repo, var, value, args):
    r = run_main(*args, cwd=repo.path, env={var: value, "BEAKER_TOKEN": "t"})
    one_line(r, 2, var, repr(value))


@pytest.mark.parametrize("value", ["abc", "nan", "inf", "-1"])
def test_bad_stop_grace_fails_the_launch_not_the_run(repo, value):
    r = run_main("run", "--local", "--no-python", *CMD, cwd=repo.path, env={"LAUNCHKIT_STOP_GRACE": value})
    one_line(r, 2, "LAUNCHKIT_STOP_GRACE", repr(value))


def test_secret_value_that_is_not_utf8(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "launchkit", "secret", "set", "MY_SECRET"],
        input=b"Zq9\xff\xfeWv7\n",
        capture_output=True,
        timeout=60,
    )
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert err.count("\n") == 1 and err.startswith("error: ") and "MY_SECRET" in err and "UTF-8" in err
    assert "Traceback" not in err and "Zq9" not in err and "Wv7" not in err


# -- secrets ---------------------------------------------------------------------------------------

SECRET_NAMES = [
    "GH_PAT",
    "DB_PASSWD",
    "SSH_PRIVATE_KEY",
    "WANDB_KEY",
    "PASSPHRASE",
    "MY_CREDENTIALS",
    "DB_PASSWORD",
    "MY_SECRET_VALUE",
    "OPENAI_APIKEY",
    "SLACK_WEBHOOK_URL",
    "HF_TOKEN",
]
TOKENS = [
    HF,
    GHP,
    "gho_" + "Q" * 36,
    "github_pat_" + "11ABCDEFG0" * 3,
    "sk-" + "proj-" + "a" * 40,
    "xoxb-1234567890-abcdefghij",
    "AKIAIOSFODNN7EXAMPLE",
    "glpat-" + "x1y2z3" * 4,
    "https://user:" + GHP + "@example.com/x",
]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_looking_names_are_refused(repo, name):
    r = run_main("run", "--dry-run", "--env", f"{name}=s3cr3t-value", *CMD, cwd=repo.path)
    one_line(r, 2, f"'{name}'", "--env-secret")
    assert "s3cr3t-value" not in r.stderr + r.stdout


@pytest.mark.parametrize("value", TOKENS)
def test_token_shaped_values_are_refused(repo, value):
    r = run_main("run", "--dry-run", "--env", f"FOO={value}", *CMD, cwd=repo.path)
    one_line(r, 2, "'FOO'", "--env-secret FOO")
    assert value not in r.stderr + r.stdout and value[5:] not in r.stderr


def test_token_shaped_value_in_config_env(repo):
    repo.commit({"pyproject.toml": f'[tool.launchkit.env]\nFOO = "{HF}"\n'})
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    one_line(r, 2, "'FOO'", "pyproject.toml", "--env-secret FOO")
    assert HF not in r.stderr + r.stdout


def test_token_copied_from_the_shell_is_refused(repo):
    r = run_main("run", "--dry-run", "--env", "FOO", *CMD, cwd=repo.path, env={"FOO": HF})
    one_line(r, 2, "'FOO'")
    assert HF not in r.stderr + r.stdout


@pytest.mark.parametrize(
    "env",
    [
        "TOKENIZERS_PARALLELISM=false",
        "MAX_NEW_TOKENS=512",
        "OMP_NUM_THREADS=4",
        "NCCL_DEBUG=INFO",
        "HF_HUB_OFFLINE=1",
        "COMMIT=0123456789abcdef0123456789abcdef01234567",
        "MODEL=sk-learn",
    ],
)
def test_ordinary_variables_pass(repo, env):
    r = run_main("run", "--dry-run", "--env", env, *CMD, cwd=repo.path)
    assert r.code == 0, r.stderr


@pytest.mark.parametrize(
    "url,hidden,kept",
    [
        (
            "https://x-access-token:" + GHP + "@github.com/o/r.git",
            [GHP, "x-access-token"],
            ["github.com/o/r"],
        ),
        ("https://" + GHP + "@github.com/o/r.git", [GHP], ["github.com/o/r"]),
        ("https://h.example/p?access_token=abc123&page=2", ["abc123"], ["access_token=***", "page=2"]),
        ("https://h.example/blob?sv=1&sig=ZZZsig&se=2", ["ZZZsig"], ["sig=***", "sv=1"]),
        ("https://h.example/p?token=t0k&key=k3y", ["t0k", "k3y"], ["token=***", "key=***"]),
        ("ssh://git@host.example/o/r.git", [], ["ssh://git@host.example/o/r.git"]),
        ("ftp://u:pa55@h.example/f", ["pa55"], ["u:***@h.example"]),
    ],
)
def test_redact_url(url, hidden, kept):
    from launchkit.core.redact import redact_text, redact_url

    for shown in (redact_url(url), redact_text(f"launched x -> {url} (done)")):
        for h in hidden:
            assert h not in shown, shown
        for k in kept:
            assert k in shown, shown


def test_every_message_is_redacted():
    from launchkit.application import Application

    err = io.StringIO()
    app = Application(stderr=err, color=False)
    app.info("cloning https://u:" + GHP + "@github.com/o/r.git")
    app.warn("see https://h.example/x?access_token=abc123")
    app.error("remote 'file:///r.git?token=zzz' is gone")
    out = err.getvalue()
    assert GHP not in out and "abc123" not in out and "zzz" not in out
    assert out.count("***") == 3


def test_remote_with_a_query_token_is_never_echoed(repo):
    url = repo.remote.as_uri() + "?access_token=SEKRIT123"
    r = run_main("run", "--dry-run", "--remote", url, "--branch", "main", *CMD, cwd=repo.path)
    assert "SEKRIT123" not in r.stderr + r.stdout, r.stderr


def test_job_clone_url_drops_query_credentials():
    from launchkit.core.remoteurl import job_remote

    url = job_remote("https://h.example/o/r.git?access_token=abc&x=1").url
    assert "abc" not in url and "access_token" not in url and "x=1" in url


# -- the new user's path: a forgotten `--` -----------------------------------------------------------


@pytest.mark.parametrize(
    "args,fix",
    [
        (["run", "python", "train.py", "--lr", "3e-4"], "-- python train.py --lr 3e-4"),
        (["run", "--gpus", "1", "python", "train.py", "--lr", "3e-4"], "-- python train.py --lr 3e-4"),
        (["run", "--dry-run", "python", "-m", "train", "--lr=3e-4"], "-- python -m train --lr=3e-4"),
        (["-v", "run", "torchrun", "--nproc-per-node", "8", "t.py"], "-- torchrun --nproc-per-node 8 t.py"),
    ],
)
def test_forgotten_separator_before_command_flags(repo, args, fix):
    r = run_main(*args, cwd=repo.path)
    line = one_line(r, 2, "put the command after `--`", fix)
    assert "No such option" not in line and "Possible options" not in line


def test_unknown_option_with_separator_keeps_clicks_message(repo):
    r = run_main("run", "--gpuz", "1", *CMD, cwd=repo.path)
    one_line(r, 2, "No such option: --gpuz")
