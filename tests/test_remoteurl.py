"""launchkit.core.remoteurl: the URL a job clones from (pure, no I/O)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from launchkit.core.remoteurl import is_url, job_remote, strip_credentials


@pytest.mark.parametrize(
    "url,expected",
    [
        ("git@github.com:org/repo.git", "https://github.com/org/repo.git"),
        ("git@github.com:org/repo", "https://github.com/org/repo"),
        ("ssh://git@github.com/org/repo", "https://github.com/org/repo"),
        ("ssh://git@github.com/org/repo.git", "https://github.com/org/repo.git"),
        ("ssh://git@github.com:22/org/repo.git", "https://github.com/org/repo.git"),
        ("git+ssh://git@github.com/org/repo.git", "https://github.com/org/repo.git"),
        ("ssh://git@ssh.github.com:443/org/repo.git", "https://github.com/org/repo.git"),
        ("github.com:org/repo.git", "https://github.com/org/repo.git"),
        ("git@GitHub.com:Org/Repo.git", "https://github.com/Org/Repo.git"),
        ("git@gitlab.com:group/sub/repo.git", "https://gitlab.com/group/sub/repo.git"),
        ("ssh://git@altssh.gitlab.com:443/group/repo.git", "https://gitlab.com/group/repo.git"),
        ("git@bitbucket.org:team/repo.git", "https://bitbucket.org/team/repo.git"),
        ("ssh://user:pw@github.com/org/repo.git", "https://github.com/org/repo.git"),
    ],
)
def test_ssh_of_known_hosts_becomes_https(url, expected):
    job = job_remote(url)
    assert job.url == expected and job.ssh_host is None


@pytest.mark.parametrize(
    "url,host,guess",
    [
        ("git@git.corp.example:team/p.git", "git.corp.example", "https://git.corp.example/team/p.git"),
        ("ssh://git@gitlab.example.com:2222/g/r", "gitlab.example.com", "https://gitlab.example.com/g/r"),
        ("ssh://me:pw@host.example/r.git", "host.example", "https://host.example/r.git"),
    ],
)
def test_ssh_of_other_hosts_is_flagged(url, host, guess):
    job = job_remote(url)
    assert job.ssh_host == host and job.https_guess == guess and job.github_repo is None
    assert "pw" not in job.url


@pytest.mark.parametrize(
    "url,expected",
    [
        ("https://github.com/org/repo.git", "org/repo"),
        ("https://github.com/org/repo", "org/repo"),
        ("https://github.com/org/repo/", "org/repo"),
        ("https://github.com/alice/alice.github.io.git", "alice/alice.github.io"),  # gantry gets this wrong
        ("https://tok@github.com/org/repo.git", "org/repo"),
        ("git@github.com:org/repo.git", "org/repo"),
        ("https://gitlab.com/org/repo.git", None),
        ("https://github.com/org", None),
        ("https://github.com/org/repo/tree/main", None),
        ("http://github.com/org/repo.git", None),
        ("file:///srv/github.com/org/repo", None),
    ],
)
def test_github_repo(url, expected):
    assert job_remote(url).github_repo == expected


def test_local_and_file_urls_are_kept():
    for url in ("/srv/git/repo.git", "file:///srv/git/repo.git", "git://example.com/r.git"):
        assert job_remote(url).url == url and job_remote(url).ssh_host is None


def test_is_url():
    assert is_url("git@github.com:o/r") and is_url("https://x/y") and is_url("/abs/path")
    assert not is_url("origin") and not is_url("upstream")


name = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyzABC0123456789-_."), min_size=1, max_size=12).filter(
    lambda s: s not in (".", "..") and not s.endswith(".git")
)
secret = st.text(st.sampled_from("abcdefXYZ0123456789_-~"), min_size=6, max_size=20)


@given(
    org=name, repo=name, git_suffix=st.booleans(), form=st.sampled_from(["scp", "ssh", "ssh-port", "https"])
)
def test_github_remote_forms_agree(org, repo, git_suffix, form):
    path = f"{org}/{repo}" + (".git" if git_suffix else "")
    url = {
        "scp": f"git@github.com:{path}",
        "ssh": f"ssh://git@github.com/{path}",
        "ssh-port": f"ssh://git@github.com:22/{path}",
        "https": f"https://github.com/{path}",
    }[form]
    job = job_remote(url)
    assert job.url == f"https://github.com/{path}"
    assert job.github_repo == f"{org}/{repo}"
    assert job_remote(job.url) == job  # idempotent


@given(
    user=secret,
    password=st.one_of(st.none(), secret),
    scheme=st.sampled_from(["https", "http", "ssh", "git+ssh"]),
    host=st.sampled_from(["github.com", "gitlab.com", "git.example.org", "example.com:8443"]),
)
def test_credentials_never_reach_the_job_url(user, password, scheme, host):
    assume(password is None or password not in user)
    userinfo = user + (f":{password}" if password else "")
    job = job_remote(f"{scheme}://{userinfo}@{host}/org/repo.git")
    if password:
        assert password not in job.url
    if scheme.startswith("http") or job.ssh_host is None:
        assert user not in job.url  # https: any user-info may be a token
    assert job.url.endswith("/org/repo.git")


def test_strip_credentials_keeps_the_ssh_user_and_the_port():
    assert strip_credentials("ssh://git:pw@host.example:2222/r.git") == "ssh://git@host.example:2222/r.git"
    assert strip_credentials("https://u:p@host.example:8443/r.git") == "https://host.example:8443/r.git"
    assert strip_credentials("git@host.example:r.git") == "git@host.example:r.git"
