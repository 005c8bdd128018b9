"""core/mason.py, the translation of mason.py's command line (fast tier: pure functions only)."""

from __future__ import annotations

import pytest

import mason_reference as mr
from launchkit.core import mason as m
from launchkit.core.request import ExecMethod, Priority
from launchkit.errors import UsageError

LAUNCH = m.Launch(whoami="jdoe", wandb_id="ab12cd34", now=1795615113.7, rand=42)
EXTERNAL = m.Launch(whoami=None, wandb_id="ab12cd34", now=1.0, rand=1)
CKPT = "/weka/oe-adapt-default/allennlp/deletable_checkpoint_states"
OUT = "/weka/oe-adapt-default/allennlp/deletable_checkpoint"


def _args(*argv: str) -> m.MasonArgs:
    return m.parse_args(list(argv))


def test_every_recorded_cache_command_is_what_mason_ran():
    """The local `--cache_dataset_only` runs, for every recorded line (mason ran them; results.jsonl)."""
    results = mr.load_results()
    checked = 0
    for line in mr.load_lines():
        head, _ = mr.split_argv(line.argv)
        try:
            args = m.parse_args(head)
        except UsageError:
            continue  # the lines with options mason no longer has
        want = results[line.id]["cache_commands"]
        assert m.cache_commands(m.split_commands(line.argv[len(head) :]), args) == want, line.id
        checked += bool(want)
    assert checked >= 10


def test_parser_is_masons():
    a = _args("--cluster", "ai2/a", "ai2/b", "--cluster", "ai2/c", "--gpu", "8", "--env", "X=a=b")
    assert a.cluster == ["ai2/c"]  # nargs="+": the last flag wins, as argparse does in mason
    assert a.gpus == 8  # argparse abbreviations, as mason
    assert a.env == [("X", "a=b")] and a.shared_memory == "10.24gb" and a.priority == "normal"
    assert m.parse_args(["--cluster", "x"], run_name="my run").description == "my run"
    for argv, words in (
        (["--gpus", "1"], "--cluster"),
        (["--cluster", "x", "--gs_model_name", "y"], "'--gs_model_name' is not a mason option"),
        (["--cluster", "x", "--priority", "max"], "--priority 'max'"),
        (["--cluster", "x", "--env", "NOVALUE"], "NAME=value"),
        (["--cluster", "x", "--beaker_datasets", "a:b:c"], "MOUNT_PATH:BEAKER_DATASET_ID"),
        (["--cluster", "x", "--num_nodes", "0"], "--num_nodes 0"),
        (["--cluster", "x", "--offline"], "--offline needs --dry-run"),
    ):
        with pytest.raises(UsageError, match=words.replace("(", r"\(")):
            m.parse_args(argv)


def test_split_commands_is_masons():
    assert m.split_commands(["a", "b", "--", "--", "c"]) == [["a", "b"], ["c"]]
    with pytest.raises(UsageError, match="no command"):
        m.split_commands(["--"])


def test_open_instruct_rewrites_on_weka():
    args = _args("--cluster", "ai2/jupiter", "--artifact_ttl", "1d")
    cmd = ["python", "open_instruct/grpo_fast.py", "--output_dir", "/output", "--checkpoint_state_dir", "/x"]
    assert m.render_command(cmd, args, LAUNCH) == (
        "python open_instruct/grpo_fast.py --hf_entity allenai --wandb_entity ai2-llm "
        f"--checkpoint_state_dir {CKPT}/jdoe/1795615113_42/tmp-1d --output_dir {OUT}/jdoe/tmp-1d/"
    )
    kept = ["python", "open_instruct/grpo.py", "--output_dir", "/weka/x", "--checkpoint_state_dir", "/weka/y"]
    kept += ["--hf_entity", "me", "--wandb_entity", "me"]
    assert m.render_command(list(kept), args, LAUNCH) == " ".join(kept)
    # no rewrite needing the user for an external user; none of the output dir off Weka
    assert "--output_dir /output" in m.render_command(cmd, args, EXTERNAL)
    other = _args("--cluster", "ai2/phobos")
    assert "--output_dir /output" in m.render_command(cmd, other, LAUNCH)
    assert f"--checkpoint_state_dir {CKPT}/jdoe/1795615113_42" in m.render_command(cmd, other, LAUNCH)
    with pytest.raises(UsageError, match="auto_output_dir_path"):
        m.render_command(cmd, _args("--cluster", "ai2/jupiter", "--auto_output_dir_path", ""), LAUNCH)


def test_quoting_and_multi_node_accelerate():
    args = _args("--cluster", "ai2/jupiter", "--num_nodes", "2")
    cmd = ["accelerate", "launch", "--num_processes", "8", "x.py", "--stop", "</a>", "--mix", '{"a": 1}']
    assert m.render_command(cmd, args, LAUNCH) == (
        "accelerate launch --num_processes 16 --num_machines 2 --machine_rank $BEAKER_REPLICA_RANK "
        "--main_process_ip $BEAKER_LEADER_REPLICA_HOSTNAME --main_process_port 29400  x.py --stop '</a>' "
        """--mix '{"a": 1}'"""
    )
    with pytest.raises(UsageError, match="no --num_processes"):
        m.render_command(["accelerate", "launch", "x.py"], args, LAUNCH)


def test_request_fields():
    args = _args(
        *("--cluster", "ai2/jupiter", "--num_nodes", "2", "--gpus", "8", "--priority", "high", "--timeout"),
        *("2h30m", "--max_retries", "3", "--secret", "HF_TOKEN=mine", "--env", "A=1", "--beaker_datasets"),
        *("/m:01ABC", "--mount_docker_socket", "--task_name", "t"),
    )
    r = m.to_request(args, [["python", "open_instruct/grpo_fast.py"], ["echo", "hi"]], LAUNCH)
    assert (
        r.commands[1] == ["echo hi"] and r.multi and r.task_name == "t" and r.exec_method is ExecMethod.bash
    )
    assert (r.results_dir, r.presets, r.replicas, r.gpus) == ("/output", ["open-instruct"], 2, 8)
    assert r.leader_selection and r.propagate_failure and r.propagate_preemption and r.host_networking
    assert (r.priority, r.task_timeout, r.retries, r.preemptible) == (Priority.high, 9000.0, 3, False)
    assert r.shared_memory == 10_240_000_000 and r.beaker_image == "ai2/cuda11.8-cudnn8-dev-ubuntu20.04"
    env = {e.name: e.value for e in r.env}
    assert env == {
        "A": "1",
        "CHECKPOINT_OUTPUT_DIR": f"{CKPT}/ab12cd34",
        "WANDB_RUN_ID": "ab12cd34",
        "WANDB_RESUME": "allow",
    }
    assert [(s.name, s.secret) for s in r.env_secrets] == [("HF_TOKEN", "mine")]
    assert [(d.dataset, d.mount_path) for d in r.datasets] == [("01ABC", "/m")]
    assert r.mounts[0].host_path == "/var/run/docker.sock"
    single = m.to_request(_args("--cluster", "ai2/phobos", "--no-host-networking"), [["true"]], LAUNCH)
    assert single.task_name == "beaker_mason__0" and not single.commands and not single.host_networking
    assert not single.leader_selection and single.gpus is None
    assert not {e.name for e in single.env} & {"CHECKPOINT_OUTPUT_DIR", "WANDB_RUN_ID"}  # not Weka, not grpo
    non_resumable = m.to_request(
        _args("--cluster", "ai2/jupiter", "--non_resumable"), [["python", "open_instruct/grpo.py"]], LAUNCH
    )
    assert "WANDB_RUN_ID" not in {e.name for e in non_resumable.env}
    with_host = m.to_request(_args("--cluster", "ai2/jupiter", "--hostname", "h1"), [["true"]], LAUNCH)
    assert (with_host.hostnames, with_host.clusters, with_host.profile) == (["h1"], [], "ai2-weka")


def test_wandb_variables_of_the_launching_shell_become_task_env():
    launch = m.Launch("jdoe", "ab12cd34", 1.0, 1, environ={"WANDB_PROJECT": "p", "HOME": "/h"})
    r = m.to_request(_args("--cluster", "ai2/phobos"), [["true"]], launch)
    assert [(e.name, e.value) for e in r.env] == [("WANDB_PROJECT", "p")]


def test_bad_values_are_usage_errors():
    for argv, words in (
        (("--shared_memory", "lots"), "--shared_memory 'lots'"),
        (("--timeout", "soon"), "--timeout 'soon'"),
    ):
        with pytest.raises(UsageError, match=words):
            m.to_request(_args("--cluster", "x", *argv), [["true"]], LAUNCH)


def test_gs_tokenizer_and_interconnect():
    args = _args("--cluster", "ai2/saturn", "--num_nodes", "2")
    gs = m.gs_tokenizer(["x.py", "--model_name_or_path", "gs://b/m/", "--y"], args, "jdoe")
    assert gs is not None and gs.files[0] == "gs://b/m/tokenizer.json"
    assert gs.folder.startswith(f"{OUT}/jdoe/tokenizer_") and gs.argv[2] == gs.folder
    assert m.gs_tokenizer(["x.py", "--model_name_or_path", "hf/m"], args, "jdoe") is None
    assert "ai2/saturn" in (m.interconnect_warning(args) or "")
    assert m.interconnect_warning(_args("--cluster", "ai2/jupiter", "--num_nodes", "2")) is None


def test_a_secret_reference_in_env_is_passed_as_mason_passes_it():
    """`--env SERPER_API_KEY=secret:team_SERPER_API_KEY` (an open-instruct line): mason writes the text into
    the spec; it names a secret, it is not one. Passed the same, with a note naming --secret."""
    args = _args("--cluster", "ai2/phobos", "--env", "SERPER_API_KEY=secret:team_SERPER_API_KEY")
    r = m.to_request(args, [["true"]], LAUNCH)
    assert ("SERPER_API_KEY", "secret:team_SERPER_API_KEY") in [(e.name, e.value) for e in r.env]
    assert not [s for s in r.env_secrets if s.name == "SERPER_API_KEY"]
    assert m.secret_reference_notes(args) == [
        "--env SERPER_API_KEY=secret:team_SERPER_API_KEY: passed as the text 'secret:team_SERPER_API_KEY', "
        "as mason passes it (the job does not get the secret team_SERPER_API_KEY's value; for that pass "
        "--secret SERPER_API_KEY=team_SERPER_API_KEY)"
    ]
    # a value that is a secret stays refused, and so does a reference that names no secret
    for value in ("sk-" + "a1B2c3D4e5F6g7H8i9J0" * 2, "secret:"):
        with pytest.raises(UsageError, match="SERPER_API_KEY"):
            m.to_request(
                _args("--cluster", "ai2/phobos", "--env", f"SERPER_API_KEY={value}"), [["true"]], LAUNCH
            )
    assert m.secret_reference_notes(_args("--cluster", "x", "--env", "A=1")) == []


def test_an_env_mason_also_sets_on_weka_is_sent_once_yours():
    """docs/from-mason.md: mason sends `HF_HOME` twice on Weka (yours, then its own); launchkit once: yours."""
    from launchkit.core.gitstate import GitState
    from launchkit.core.spec import build_spec

    r = m.to_request(_args("--cluster", "ai2/jupiter", "--env", "HF_HOME=/mine"), [["true"]], LAUNCH)
    git = GitState(remote_url="https://github.com/a/b", commit="a" * 40, branch="main")
    env = [(e["name"], e.get("value")) for e in build_spec(r, git).to_json()["tasks"][0]["envVars"]]
    assert [v for n, v in env if n == "HF_HOME"] == ["/mine"]
    assert ("HF_HUB_CACHE", "/weka/oe-adapt-default/allennlp/.cache/hub") in env  # mason's others stay
