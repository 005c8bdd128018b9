"""Git state from real repositories with local bare remotes (no network)."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from conftest import git, run_cli
from inproc import run_main
from launchkit.core.remoteurl import job_remote
from launchkit.errors import PreconditionError, UsageError
from launchkit.git import read_git_state
from lk_helpers import entrypoint

CMD = ["--", "python", "train.py"]


def test_reads_state_from_a_subdirectory(repo):
    sub = repo.path / "a" / "b"
    sub.mkdir(parents=True)
    state = read_git_state(str(sub))
    assert state.commit == git(repo.path, "rev-parse", "HEAD") and len(state.commit) == 40
    assert state.branch == "main"
    assert state.remote_url == repo.remote.as_uri() and state.remote_name == "origin"
    assert state.repo_root == str(repo.path)


def test_dry_run_records_remote_commit_and_branch(repo):
    spec = yaml.safe_load(run_main("run", "--dry-run", *CMD, cwd=repo.path).stdout)
    env = {e["name"]: e.get("value") for e in spec["tasks"][0]["envVars"]}
    assert env["LAUNCHKIT_GIT_REMOTE"] == repo.remote.as_uri()
    assert env["LAUNCHKIT_GIT_COMMIT"] == git(repo.path, "rev-parse", "HEAD")
    assert env["LAUNCHKIT_GIT_BRANCH"] == "main"


def test_refuses_uncommitted_changes_to_tracked_files(repo):
    (repo.path / "train.py").write_text("changed\n")
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    assert r.code == 3 and "uncommitted changes" in r.stderr and "train.py" in r.stderr
    assert "--allow-dirty" in r.stderr and r.stdout == ""
    ok = run_main("run", "--dry-run", "--allow-dirty", *CMD, cwd=repo.path)
    assert ok.code == 0, ok.stderr
    head = git(repo.path, "rev-parse", "HEAD")[:12]  # what is left out is said (issue 31)
    assert f"uncommitted changes to train.py are not in the job: it runs commit {head}" in ok.stderr
    # named by remote as well (--remote): the same note
    slow = run_main("run", "--dry-run", "--allow-dirty", "--remote", "origin", *CMD, cwd=repo.path)
    assert slow.code == 0 and "uncommitted changes to train.py are not in the job" in slow.stderr, slow.stderr


def test_staged_changes_are_dirty_too(repo):
    (repo.path / "new.py").write_text("x\n")
    git(repo.path, "add", "new.py")
    with pytest.raises(PreconditionError, match=r"new\.py"):
        read_git_state(str(repo.path))


def test_untracked_files_are_fine(repo):
    (repo.path / "notes.txt").write_text("scratch\n")
    assert read_git_state(str(repo.path)).commit


def test_refuses_a_commit_the_remote_does_not_have(repo):
    repo.commit({"train.py": "v2\n"}, push=False)
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    assert r.code == 3 and "not on remote 'origin'" in r.stderr and "git push origin main" in r.stderr
    git(repo.path, "push", "-q", "origin", "main")
    assert run_main("run", "--dry-run", *CMD, cwd=repo.path).code == 0


def test_branch_without_upstream_but_pushed(repo):
    git(repo.path, "checkout", "-q", "-b", "feature")
    repo.commit({"f.py": "x\n"}, push=False)
    with pytest.raises(PreconditionError) as err:
        read_git_state(str(repo.path))
    assert "git push origin feature" in err.value.one_line()
    git(repo.path, "push", "-q", "origin", "feature")  # no -u: no upstream configured
    state = read_git_state(str(repo.path))
    assert state.branch == "feature" and state.commit == git(repo.path, "rev-parse", "HEAD")


def test_ref_short_sha_becomes_full_sha(repo):
    first = git(repo.path, "rev-parse", "HEAD")
    repo.commit({"train.py": "v2\n"})
    state = read_git_state(str(repo.path), ref=first[:7])
    assert state.commit == first


def test_ref_tag_and_branch_names(repo):
    git(repo.path, "tag", "-a", "v1", "-m", "v1")
    head = git(repo.path, "rev-parse", "HEAD")
    assert read_git_state(str(repo.path), ref="v1").commit == head
    assert read_git_state(str(repo.path), ref="origin/main").commit == head


def test_ref_skips_the_dirty_check_but_not_the_pushed_check(repo):
    (repo.path / "train.py").write_text("dirty\n")
    assert read_git_state(str(repo.path), ref="HEAD").commit
    unpushed = repo.commit({"x.py": "1\n"}, push=False)
    with pytest.raises(PreconditionError, match="not on remote"):
        read_git_state(str(repo.path), ref=unpushed)


@pytest.mark.parametrize("ref", ["no-such-branch", "deadbeef", "0" * 40])
def test_unknown_ref(repo, ref):
    r = run_main("run", "--dry-run", "--ref", ref, *CMD, cwd=repo.path)
    assert r.code == 2 and repr(ref) in r.stderr and "git fetch origin" in r.stderr


def test_detached_head(repo):
    repo.commit({"train.py": "v2\n"})
    git(repo.path, "checkout", "-q", "--detach", "HEAD~1")
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    assert r.code == 3 and "detached" in r.stderr and "--ref" in r.stderr
    assert run_main("run", "--dry-run", "--ref", "HEAD", *CMD, cwd=repo.path).code == 0


def test_no_remote(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "a").write_text("a")
    git(work, "add", "a")
    git(work, "commit", "-q", "-m", "a")
    r = run_main("run", "--dry-run", *CMD, cwd=work)
    assert r.code == 2 and "no remote" in r.stderr and "git remote add origin" in r.stderr


def test_not_a_repository(tmp_path):
    r = run_main("run", "--dry-run", *CMD, cwd=tmp_path)
    assert r.code == 2 and "not inside a git repository" in r.stderr and "--remote" in r.stderr


def test_branch_option_launches_the_pushed_tip(repo):
    main_sha = git(repo.path, "rev-parse", "HEAD")
    git(repo.path, "checkout", "-q", "-b", "other")
    other = repo.commit({"o.py": "o\n"})
    git(repo.path, "checkout", "-q", "main")
    state = read_git_state(str(repo.path), branch="other")
    assert state.commit == other != main_sha and state.branch == "other"
    with pytest.raises(UsageError, match="not on remote"):
        read_git_state(str(repo.path), branch="missing")


def test_remote_url_outside_a_repository(repo, tmp_path):
    head = git(repo.path, "rev-parse", "HEAD")
    git(repo.path, "tag", "v1")
    git(repo.path, "push", "-q", "origin", "v1")
    url = repo.remote.as_uri()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert read_git_state(str(outside), remote=url, branch="main").commit == head
    assert read_git_state(str(outside), remote=url, ref="v1").commit == head
    assert read_git_state(str(outside), remote=url, ref=head).commit == head  # full SHA: no lookup
    with pytest.raises(UsageError, match="not on remote"):
        read_git_state(str(outside), remote=url, ref="nope")
    r = run_main("run", "--dry-run", "--remote", url, *CMD, cwd=outside)
    assert r.code == 2 and "--ref" in r.stderr


def test_upstream_remote_is_preferred_and_named_remote_works(repo, tmp_path):
    fork = tmp_path / "fork.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(fork)], check=True, timeout=60)
    git(repo.path, "remote", "add", "fork", str(fork))
    git(repo.path, "checkout", "-q", "-b", "topic")
    repo.commit({"t.py": "t\n"}, push=False)
    git(repo.path, "push", "-q", "-u", "fork", "topic")
    state = read_git_state(str(repo.path))
    assert state.remote_name == "fork" and state.remote_url == str(fork) and state.branch == "topic"
    with pytest.raises(PreconditionError, match="not on remote 'origin'"):
        read_git_state(str(repo.path), remote="origin")
    with pytest.raises(UsageError) as err:
        read_git_state(str(repo.path), remote="upstream")
    assert "known remotes: fork, origin" in err.value.one_line()


def test_insteadof_is_applied(repo, tmp_path):
    git(repo.path, "config", f"url.{repo.remote.parent.as_uri()}/.insteadOf", "short:")
    git(repo.path, "remote", "set-url", "origin", "short:remote.git")
    git(repo.path, "fetch", "-q", "origin")
    assert read_git_state(str(repo.path)).remote_url == repo.remote.as_uri()


def test_relative_path_remote_becomes_absolute(repo):
    git(repo.path, "remote", "set-url", "origin", "../remote.git")
    assert read_git_state(str(repo.path)).remote_url == str(repo.remote)


@pytest.mark.parametrize(
    "url,expected",
    [
        ("https://github.com/org/repo.git", "https://github.com/org/repo.git"),
        ("https://user:ghp_secret@github.com/org/repo.git", "https://github.com/org/repo.git"),
        (
            "https://oauth2@gitlab.example.com:8443/group/sub/repo.git",
            "https://gitlab.example.com:8443/group/sub/repo.git",
        ),
        ("git@github.com:org/repo.git", "https://github.com/org/repo.git"),  # jobs have no SSH keys
        ("ssh://git@gitlab.com/group/repo.git", "https://gitlab.com/group/repo.git"),
        ("git@git.internal.corp:team/project", "git@git.internal.corp:team/project"),
        ("file:///srv/git/repo.git", "file:///srv/git/repo.git"),
        ("/srv/git/repo.git", "/srv/git/repo.git"),
    ],
)
def test_any_host(url, expected):
    assert job_remote(url).url == expected


def test_secret_free_url_in_spec(repo):
    git(repo.path, "remote", "set-url", "origin", "https://user:tok3n@example.com/org/repo.git")
    git(repo.path, "update-ref", "refs/remotes/origin/main", "HEAD")
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    assert r.code == 0, r.stderr
    assert "tok3n" not in r.stdout and "https://example.com/org/repo.git" in r.stdout


def spec_env(stdout: str) -> dict[str, str | None]:
    spec = yaml.safe_load(stdout)
    return {e["name"]: e.get("value") for e in spec["tasks"][0]["envVars"]}


@pytest.mark.parametrize("url", ["git@github.com:org/repo.git", "ssh://git@github.com/org/repo"])
def test_ssh_remote_of_github_is_cloned_over_https(repo, url):
    assert read_git_state(str(repo.path)).github_repo is None  # a file:// remote
    git(repo.path, "remote", "set-url", "origin", url)
    state = read_git_state(str(repo.path))
    assert state.remote_url == url.replace("git@github.com:", "https://github.com/").replace(
        "ssh://git@", "https://"
    )
    assert state.github_repo == "org/repo"
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    assert r.code == 0, r.stderr
    assert spec_env(r.stdout)["LAUNCHKIT_GIT_REMOTE"] == state.remote_url


def test_ssh_remote_of_another_host_is_refused_with_the_fix(repo):
    git(repo.path, "remote", "set-url", "origin", "git@git.corp.example:team/p.git")
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    assert r.code == 3 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "SSH" in r.stderr and "git remote set-url origin https://git.corp.example/team/p.git" in r.stderr
    # the local backend clones from the checkout itself: no refusal, the URL kept
    assert (
        read_git_state(str(repo.path), require_pushed=False).remote_url == "git@git.corp.example:team/p.git"
    )


def test_ssh_remote_url_of_another_host_is_a_usage_error(repo, tmp_path):
    head = git(repo.path, "rev-parse", "HEAD")
    r = run_main(
        "run", "--dry-run", "--remote", "git@git.corp.example:t/p.git", "--ref", head, *CMD, cwd=tmp_path
    )
    assert r.code == 2 and "--remote https://git.corp.example/t/p.git" in r.stderr, r.stderr


def test_ssh_credentials_never_reach_the_spec(repo):
    git(repo.path, "remote", "set-url", "origin", "ssh://me:hunter2@github.com/org/repo.git")
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    assert r.code == 0, r.stderr
    assert "hunter2" not in r.stdout + r.stderr and "me@" not in r.stdout
    assert spec_env(r.stdout)["LAUNCHKIT_GIT_REMOTE"] == "https://github.com/org/repo.git"


def test_untracked_files_are_named_in_one_warning(repo):
    (repo.path / ".gitignore").write_text("*.log\n")
    repo.commit({})
    (repo.path / "run.log").write_text("ignored\n")
    clean = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    assert clean.code == 0 and "warning:" not in clean.stderr, clean.stderr
    for name in ("b.py", "a.py", "data/x.csv", "c.txt", "d.txt"):
        (repo.path / name).parent.mkdir(exist_ok=True)
        (repo.path / name).write_text("x\n")
    state = read_git_state(str(repo.path / "data"))
    assert sorted(state.untracked) == ["a.py", "b.py", "c.txt", "d.txt", "data/"]
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    assert r.code == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and warnings[0].startswith("warning: 5 untracked paths are not in the job: ")
    assert "and 2 more" in warnings[0] and "run.log" not in r.stderr


def test_ref_and_branch_must_agree(repo):
    main_sha = git(repo.path, "rev-parse", "HEAD")
    git(repo.path, "checkout", "-q", "-b", "feat")
    feat = repo.commit({"f.py": "f\n"})
    r = run_main("run", "--dry-run", "--ref", "main", "--branch", "feat", *CMD, cwd=repo.path)
    assert r.code == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--ref 'main'" in r.stderr and "--branch 'feat'" in r.stderr and main_sha[:12] in r.stderr
    ok = read_git_state(str(repo.path), ref=feat[:10], branch="feat")
    assert ok.commit == feat and ok.branch == "feat"


def test_ref_and_branch_must_agree_outside_a_repository(repo, tmp_path):
    main_sha = git(repo.path, "rev-parse", "HEAD")
    git(repo.path, "checkout", "-q", "-b", "feat")
    feat = repo.commit({"f.py": "f\n"})
    url = repo.remote.as_uri()
    with pytest.raises(UsageError, match="not the tip of --branch 'feat'"):
        read_git_state(str(tmp_path), remote=url, ref=main_sha, branch="feat")
    with pytest.raises(UsageError, match="not the tip of --branch 'feat'"):
        read_git_state(str(tmp_path), remote=url, ref="main", branch="feat")
    assert read_git_state(str(tmp_path), remote=url, ref=feat, branch="feat").branch == "feat"


@pytest.mark.slow
def test_missing_git_is_one_line(repo):
    r = run_cli("run", "--dry-run", *CMD, cwd=repo.path, env={"PATH": "/nonexistent"})
    assert r.code == 3 and r.stderr.strip() == "error: git is not installed (install git and try again)"


def test_ssh_remote_launch_clones_over_https_on_a_node_without_ssh(repo, tmp_path):
    """The spec of a launch from an SSH remote, run by the real entrypoint with SSH disabled and
    https://github.com/org/repo redirected to the local bare repository."""
    git(repo.path, "remote", "set-url", "origin", "git@github.com:org/repo.git")
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    assert r.code == 0, r.stderr
    env = spec_env(r.stdout)
    base = repo.remote.as_uri().removesuffix(".git")  # .../remote.git = base + ".git"
    node = {
        "GIT_SSH_COMMAND": "false",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.{base}.insteadOf",
        "GIT_CONFIG_VALUE_0": "https://github.com/org/repo",
        "LAUNCHKIT_GIT_RETRIES": "1",
        "LAUNCHKIT_NO_PYTHON": "1",
    }
    out = entrypoint(
        tmp_path, env["LAUNCHKIT_GIT_REMOTE"], env["LAUNCHKIT_GIT_COMMIT"], ["cat", "train.py"], node
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "print('args'" in out.stdout
