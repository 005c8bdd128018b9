"""The run's policy (docs/architecture.md, "The run's policy"): how a run's life is decided, made once
at launch and read back by every process that acts on it. Standard library only, Python 3.8 syntax:
the launch side (core/retrying.py, core/spec.py), the backends, the local supervisor and the node
runtime (watchdog, restart, notify) all import this one module, as the planner environment/plan.py.

It holds the retry causes and their cap (`--retry-on`, `--retries`), the watchdog's limits
(`--stall-timeout`, `--stall-grace`, `--inactive-timeout`, `--inactive-soft-timeout`), the progress
patterns (`--progress-pattern`), the Slack webhook's secret name (`--slack-webhook-secret`) and who
posts which Slack event (`POSTERS`). It travels in the spec as ONE environment variable, `ENV`, whose
value is `Policy.encode()`: compact JSON, `{"parent":true,...}` first when the node runtime must stay
the command's parent (the one fact the bash bootstrap reads, by that prefix: runtime/launchers.sh).
Every reader calls `Policy.decode(value)` (or `from_env`) once; nothing else parses it.

Adding a retry cause: a name in CAUSES (and its check in `Policy.problems`, if some combination is
refused); the backends that honour it list it in their registry row (backends/registry.py:
`retry_causes`), and the one that acts on it reads `policy.retries(CAUSE)`. Adding a Slack event: a
row in EVENTS (its emoji) and in POSTERS (which process posts it, by how the run posts); the process
posts it when `posts(process, mode, event)` says so.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # (typing costs a job's start-up: for the type checker only)
if TYPE_CHECKING:
    from typing import Any, Mapping, Sequence

ENV = "LAUNCHKIT_POLICY"  # the spec's one variable: Policy.encode()
ENV_WEBHOOK = "LAUNCHKIT_SLACK_WEBHOOK"  # the webhook's value (a secret by name), for the runtime only
ENV_NOTIFY = "LAUNCHKIT_NOTIFY_URL"  # --notify-secret's value (the events' URL, a secret), the runtime only
ENV_ATTEMPT = "LAUNCHKIT_ATTEMPT"  # set on the node where the attempt number is known (supervisor)
ENV_RESTART = "LAUNCHKIT_RESTART"  # the command's restarts in place in this job so far (restart.py)
# the step the attempt before reached, given to a new attempt (the local supervisor) or an in-place
# restart (restart.py): the watchdog checks the new start against it (--require-resume: docs/retries.md)
ENV_RESUME_FROM = "LAUNCHKIT_RESUME_FROM"
PARENT_PREFIX = '{"parent":true'  # how the encoding starts when the runtime stays the parent

# ---- retry causes (docs/retries.md)
PREEMPTION = "preemption"  # ended from outside: Beaker's preemption, a SIGTERM launchkit did not send
NODE_LOST = "node-lost"  # the node went away (no backend can tell it: refused)
NEVER_STARTED = "never-started"  # a job that failed before its command started (setup, image pull)
STALLED = "stalled"  # the watchdog stopped the command (restarted in place: restart.py)
FAILURE = "failure"  # the command's own non-zero exit
EXIT = "exit"  # the command's exit with one of the codes named (`exit:29,75`): restarted in place
CAUSES = (PREEMPTION, NODE_LOST, NEVER_STARTED, STALLED, FAILURE, EXIT)
IN_PLACE = (STALLED, EXIT)  # the causes the runtime on the node retries, in the job (restart.py)
DEFAULT_CAP = 3  # retries when --retry-on is given without --retries
DEFAULT_GRACE = 600.0  # seconds before the first progress line is due (--stall-grace)

# ---- Slack events (docs/notifications.md): the event -> its emoji
EVENTS = {
    "started": ":rocket:",
    "start_timeout": ":hourglass:",
    "timeout": ":alarm_clock:",
    "inactive_soft": ":zzz:",
    "inactive": ":zzz:",
    "stalled": ":zzz:",
    "not_resuming": ":repeat:",
    "preempted": ":warning:",
    "canceled": ":octagonal_sign:",
    "failed": ":x:",
    "succeeded": ":white_check_mark:",
    "digest": ":bar_chart:",  # a sweep's tasks, as one (launchkit/notify.py: SweepDigest)
}
# Kinds only the JSON stream has (`--notify-url`, launchkit/events.py; Slack is not posted them).
STREAM_ONLY = ("waiting", "attempt", "progress", "restarted")
# Who posts: the job's runtime (node/launch/notify.py), a local run's supervisor (backends/local/
# slack.py) or `follow` (launchkit/notify.py). How a run posts (its mode): FOLLOWER, nobody in the run
# (follow --slack-webhook-url posts everything); JOB, the job's runtime with --slack-webhook-secret;
# RUN, a local run with a webhook (the runtime and the supervisor: follow posts nothing).
# SWEEP, a sweep (`--sweep`, `--sweep-experiments`): its follower posts one digest per change of the
# whole (`launchkit follow ID`, `api.wait(..., notify_url=)`), no task posts for itself.
JOB, SUPERVISOR, FOLLOW = "job", "supervisor", "follow"
FOLLOWER, RUN, SWEEP = "follower", "run", "sweep"
# (with the stream's progress and restarted: the runtime reads the output and restarts the command)
_JOB_EVENTS = (
    *("started", "inactive_soft", "inactive", "stalled", "not_resuming", "failed", "succeeded"),
    *("progress", "restarted"),
)
# The job's own "failed" is its command's exit; the supervisor's, a job that died before its command
# or a supervisor error; follow's, the rest (a Beaker job that never started, say).
POSTERS: dict[str, dict[str, tuple[str, ...]]] = {
    FOLLOWER: {FOLLOW: tuple(EVENTS) + STREAM_ONLY},
    JOB: {
        JOB: _JOB_EVENTS,
        FOLLOW: ("start_timeout", "timeout", "preempted", "canceled", "failed", "waiting", "attempt"),
    },
    RUN: {JOB: _JOB_EVENTS, SUPERVISOR: ("timeout", "canceled", "failed", "attempt")},
    SWEEP: {FOLLOW: ("digest",)},
}


def posts(process: str, mode: str, event: str) -> bool:
    """Whether `process` posts `event` for a run that posts in `mode` (POSTERS)."""
    return event in POSTERS.get(mode, {}).get(process, ())


def posts_any(process: str, mode: str) -> bool:
    """Whether `process` posts anything for a run that posts in `mode` (a sweep's tasks do not)."""
    return bool(POSTERS.get(mode, {}).get(process))


def stop_event(why: str) -> str:
    """The event for launchkit's stop `why` (the watchdog's `[launchkit] stopped: ...` reason, or a
    limit of `follow`'s, as `why` tells it)."""
    if why.endswith("(--require-resume)"):
        return "not_resuming"
    if "--inactive-timeout" in why:
        return "inactive"
    return "stalled" if "--stall-timeout" in why else "timeout"


def slack_posts(process: str, mode: str, event: str) -> bool:
    """Whether `process` posts `event` to Slack (the stream's own kinds are not Slack's)."""
    return event in EVENTS and posts(process, mode, event)


# How `launchkit why` tells the ends the job itself knows (backends/ending.py says them with these; the
# job's runtime posts them as events: node/launch/notify.py)
STOPPED_LINE = "stopped by launchkit: "  # a watchdog stop's line begins so
LOG_FIX = "see the end of its log: `launchkit logs {id} --tail 50`"
NOT_RESUMING_FIX = "load the newest checkpoint at start (docs/retries.md)"
OOM_EXIT = 137  # 128 + SIGKILL: what the kernel's out-of-memory killer leaves


def stop_line(why: str, run_id: str) -> tuple[str, str]:
    """(line, fix) of the watchdog's stop `why` (its `[launchkit] stopped: ...` reason)."""
    flag = "--inactive-timeout" if "--inactive-timeout" in why else "--stall-timeout"
    fix = f"see what it was doing: `launchkit logs {run_id} --tail 50`; if it was working, raise {flag}"
    if why.endswith("(--require-resume)"):
        fix = (
            "load the newest checkpoint at start (keep them under $LAUNCHKIT_RUN_ID: docs/retries.md),"
            " or drop --require-resume"
        )
    return STOPPED_LINE + why, fix


def exit_line(code: int, run_id: str, memory: str | None = None) -> tuple[str, str]:
    """(line, fix) of a command that exited with `code` (not 0) after it started; `memory`: the run's
    limit, when known."""
    if code == OOM_EXIT:
        limit = f" (limit {memory})" if memory else ""
        fix = (
            "give it more with --memory (e.g. --memory 64GiB), or use less"
            if memory
            else ("set a larger --memory (e.g. --memory 64GiB), or use less")
        )
        return f"killed (exit 137, SIGKILL), most likely out of memory{limit}", fix
    return f"failed with exit code {code}", LOG_FIX.format(id=run_id)


def message(event: str, label: str, line: str) -> str:
    """The text for `event`: its emoji, the run's label, one line saying what happened."""
    return f"{EVENTS[event]} {label} {line}"


class PolicyError(ValueError):
    """A policy that cannot be read; the message is one line naming the bad value."""


class ExitCodeError(PolicyError):
    """`--retry-on exit:CODES` with a bad code; the message says what is wrong."""


EXIT_STOPPED = 124  # the watchdog's stop (watchdog.EXIT_STOPPED): the cause `stalled`, not an exit code


def parse_causes(values: Sequence[str]) -> tuple[str, ...]:
    """The causes of repeated and comma-separated names (`Preemption`, `never_started` too), in
    CAUSES order; PolicyError's message is the unknown item as given."""
    return parse_retry_on(values)[0]


def parse_retry_on(values: Sequence[str]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """(causes, exit codes) of repeated and comma-separated items: `exit:29,75` (or `exit:29`,
    `exit:75`) names exit codes, the numbers after it belonging to it. PolicyError's message is the
    unknown item as given; ExitCodeError's, what is wrong with a code."""
    found, codes = set(), []
    for value in values:
        in_exit = False
        for item in str(value).split(","):
            name = item.strip().lower().replace("_", "-").replace(" ", "-")
            if name.startswith(EXIT + ":") or name == EXIT:
                found.add(EXIT)
                in_exit, name = True, name[len(EXIT) + 1 :]
                if not name:
                    raise ExitCodeError(f"{item.strip()!r} names no exit code (e.g. exit:29,75)")
            elif not (in_exit and name.isdigit()):
                in_exit = False
                if name not in CAUSES or name == EXIT:
                    raise PolicyError(item.strip())
                found.add(name)
                continue
            if not name.isdigit() or not 1 <= int(name) <= 255 or int(name) == EXIT_STOPPED:
                raise ExitCodeError(
                    f"exit code {name!r}: give codes 1-255 (124 is the watchdog's stop: use stalled)"
                )
            codes.append(int(name))
    return tuple(c for c in CAUSES if c in found), tuple(sorted(set(codes)))


_FIELDS = (
    "retry_on",
    "retry_cap",
    "stall_timeout",
    "stall_grace",
    "inactive_timeout",
    "inactive_soft_timeout",
    "progress_patterns",
    "webhook_secret",
    "require_resume",
    "retry_exit_codes",
    "stall_auto",
    "notify_url",
    "notify_secret",
    "sweep",
)
_SECONDS = ("stall_timeout", "stall_grace", "inactive_timeout", "inactive_soft_timeout")


class Policy:
    """How the run's life is decided. Immutable by convention; build with keywords, compare by value.
    (A plain class with slots: `dataclasses` costs a job's start-up ~10 ms for `inspect`.)"""

    __slots__ = _FIELDS

    retry_on: tuple[str, ...]  # the causes retried, in CAUSES order; () = Beaker's cause-blind retries
    retry_cap: int  # retries allowed for those causes (0 without --retry-on)
    stall_timeout: float | None  # seconds without a progress line
    stall_grace: float | None  # seconds before the first is due (None: DEFAULT_GRACE)
    inactive_timeout: float | None  # seconds without output
    inactive_soft_timeout: float | None  # seconds without output before a warning
    progress_patterns: tuple[str, ...]  # regexes; () = the watchdog's DEFAULT_PATTERNS
    webhook_secret: str | None  # the secret holding the Slack webhook the job posts with
    require_resume: bool  # a retried attempt that starts below the step the one before reached is stopped
    retry_exit_codes: tuple[int, ...]  # `--retry-on exit:29,75`: the codes restarted in place (EXIT)
    stall_auto: tuple[float, float] | None  # `--stall-timeout auto`: (floor, cap) seconds (stallbudget.py)
    notify_url: str | None  # `--notify-url`: where the run's events are posted as JSON (in the spec, plain)
    notify_secret: str | None  # `--notify-secret`: the secret holding that URL (ENV_NOTIFY on the node)
    sweep: bool  # a task (or run) of a sweep: its follower posts the sweep's digest, the task nothing

    def __init__(
        self,
        retry_on: Sequence[str] = (),
        retry_cap: int = 0,
        stall_timeout: float | None = None,
        stall_grace: float | None = None,
        inactive_timeout: float | None = None,
        inactive_soft_timeout: float | None = None,
        progress_patterns: Sequence[str] = (),
        webhook_secret: str | None = None,
        require_resume: bool = False,
        retry_exit_codes: Sequence[int] = (),
        stall_auto: Sequence[float] | None = None,
        notify_url: str | None = None,
        notify_secret: str | None = None,
        sweep: bool = False,
    ) -> None:
        unknown = [c for c in retry_on if c not in CAUSES]
        if unknown:
            raise PolicyError("unknown retry cause {!r} (known: {})".format(unknown[0], ", ".join(CAUSES)))
        self.retry_on = tuple(c for c in CAUSES if c in retry_on)
        self.retry_cap = int(retry_cap)
        self.stall_timeout = _seconds("stall_timeout", stall_timeout)
        self.stall_grace = _seconds("stall_grace", stall_grace)
        self.inactive_timeout = _seconds("inactive_timeout", inactive_timeout)
        self.inactive_soft_timeout = _seconds("inactive_soft_timeout", inactive_soft_timeout)
        given = [progress_patterns] if isinstance(progress_patterns, str) else progress_patterns
        self.progress_patterns = tuple(str(p) for p in given)
        self.webhook_secret = webhook_secret or None
        if not isinstance(require_resume, bool):
            raise PolicyError(f"require_resume={require_resume!r} must be true or false")
        self.require_resume = require_resume
        codes = [c for c in retry_exit_codes if isinstance(c, int) and 1 <= c <= 255 and c != EXIT_STOPPED]
        if len(codes) != len(retry_exit_codes):
            raise PolicyError(f"retry_exit_codes={list(retry_exit_codes)!r} must be exit codes 1-255 but 124")
        self.retry_exit_codes = tuple(sorted(set(codes)))
        self.notify_url = notify_url or None
        self.notify_secret = notify_secret or None
        if not isinstance(sweep, bool):
            raise PolicyError(f"sweep={sweep!r} must be true or false")
        self.sweep = sweep
        self.stall_auto = None
        if stall_auto is not None:
            bounds = [_seconds("stall_auto", v) for v in stall_auto]
            if len(bounds) != 2 or not 0 < (bounds[0] or 0) <= (bounds[1] or 0):
                raise PolicyError(
                    f"stall_auto={list(stall_auto)!r} must be [floor, cap] seconds, 0 < floor <= cap"
                )
            self.stall_auto = (float(bounds[0] or 0), float(bounds[1] or 0))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Policy) and all(getattr(self, f) == getattr(other, f) for f in _FIELDS)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, f) for f in _FIELDS))

    def __repr__(self) -> str:
        given = [f"{f}={getattr(self, f)!r}" for f in _FIELDS if getattr(self, f) != _DEFAULTS[f]]
        return "Policy({})".format(", ".join(given))

    def replace(self, **changes: Any) -> Policy:
        values = {f: getattr(self, f) for f in _FIELDS}
        values.update(changes)
        return Policy(**values)

    # ---- what it says
    def retries(self, cause: str) -> bool:
        """Whether a job that ended for `cause` is retried for it (--retry-on names it)."""
        return cause in self.retry_on

    @property
    def watched(self) -> bool:
        """The watchdog runs (a stall or inactivity limit is set)."""
        limits = (self.stall_timeout, self.stall_auto, self.inactive_timeout, self.inactive_soft_timeout)
        return any(v is not None for v in limits)

    @property
    def notifies(self) -> bool:
        """The job posts its events as JSON (--notify-url or --notify-secret)."""
        return self.notify_url is not None or self.notify_secret is not None

    @property
    def parent(self) -> bool:
        """The node runtime stays the command's parent: it watches it, posts its end, or must check
        that a retried attempt resumed (--require-resume)."""
        posts = (self.webhook_secret is not None or self.notifies) and not self.sweep
        return self.watched or posts or self.require_resume or EXIT in self.retry_on

    @property
    def restarts(self) -> int:
        """Restarts in place the runtime allows after its watchdog's stops (--retry-on stalled)."""
        return self.retry_cap if STALLED in self.retry_on else 0

    @property
    def exit_restarts(self) -> int:
        """Restarts in place the runtime allows after the command exits with one of `retry_exit_codes`
        (--retry-on exit:CODES): counted apart from the stalled ones, each cause up to the cap."""
        return self.retry_cap if EXIT in self.retry_on else 0

    def exit_label(self) -> str:
        """`exit:29,75`, as --retry-on names it."""
        return EXIT + ":" + ",".join(str(c) for c in self.retry_exit_codes)

    @property
    def grace(self) -> float:
        return DEFAULT_GRACE if self.stall_grace is None else self.stall_grace

    def problems(self, replicas: int = 1, task_retries: int = 0) -> tuple[str, str] | None:
        """The first combination no backend can honour, as (line, hint); None when it is sound.
        `task_retries`: gantry's cause-blind --retries, without --retry-on."""
        if self.require_resume and not self.retry_on and not task_retries:
            return (
                "--require-resume checks a retried attempt against the one before, but nothing retries"
                " this run",
                "add --retry-on CAUSE (e.g. --retry-on preemption,stalled)",
            )
        if not self.retry_on:
            return None
        if NODE_LOST in self.retry_on:
            return (
                "--retry-on node-lost cannot be honoured: whether Beaker starts a new job after a lost"
                " node is not known, and a local run's node is this machine",
                "use --retries N: Beaker's task retries, which also retry your command's failures",
            )
        if self.retry_cap == 0:
            return ("--retries 0 with --retry-on retries nothing", "give --retries N (N >= 1)")
        if EXIT in self.retry_on and replicas > 1:
            return (
                f"--retry-on {self.exit_label()} restarts one replica's command in place, which cannot"
                f" rejoin the other {replicas - 1} replicas",
                "use --retry-on failure: with --propagate-failure every replica starts again",
            )
        if STALLED in self.retry_on:
            if self.stall_timeout is None and self.stall_auto is None and self.inactive_timeout is None:
                return (
                    "--retry-on stalled needs a watchdog to stop a stalled command",
                    "add --stall-timeout DURATION or --inactive-timeout DURATION",
                )
            if replicas > 1:
                return (
                    "--retry-on stalled restarts one replica's command in place, which cannot rejoin"
                    f" the other {replicas - 1} replicas",
                    "use --retry-on failure: with --propagate-failure every replica starts again",
                )
        return None

    def unhonoured(self, honours: Mapping[str, Sequence[str]]) -> tuple[str, tuple[str, ...]] | None:
        """The first cause a backend cannot honour, given its registry row's `retry_causes` (a cause ->
        the causes it must be named with, as one mechanism retries them alike): (cause, those), with
        () when the backend cannot honour it at all; None when it honours them all."""
        for cause in self.retry_on:
            if cause not in honours:
                return cause, ()
            needed = tuple(honours[cause])
            if any(c not in self.retry_on for c in needed):
                return cause, needed
        return None

    def resume_unchecked(self, checked: Sequence[str] | None) -> bool:
        """Whether --require-resume asks more than a backend can check: `checked` are the causes after
        which it sees the attempt before (its registry row's `resume_checked`; None: after every retry)."""
        if not self.require_resume or checked is None:
            return False
        return not (self.retry_on and set(self.retry_on) <= set(checked))

    def slack_mode(self) -> str:
        """How the run posts, as far as the spec says: SWEEP for a sweep's task, JOB with a webhook
        secret or an events URL, else FOLLOWER (a local run with a webhook is RUN: its backend knows)."""
        if self.sweep:
            return SWEEP
        return JOB if self.webhook_secret is not None or self.notifies else FOLLOWER

    # ---- the spec's variable
    def encode(self) -> str | None:
        """The value of ENV (None: nothing to say, the variable is left out)."""
        data: dict[str, Any] = {"parent": True} if self.parent else {}  # first: PARENT_PREFIX
        for f in _FIELDS:
            value = getattr(self, f)
            if value != _DEFAULTS[f]:
                if isinstance(value, float) and value.is_integer():
                    value = int(value)  # 300, not 300.0: read back as the same seconds
                if isinstance(value, tuple):
                    value = [int(v) if isinstance(v, float) and v.is_integer() else v for v in value]
                data[f] = value
        if not data:
            return None
        return json.dumps(data, separators=(",", ":"), ensure_ascii=True)

    @classmethod
    def decode(cls, value: str | None) -> Policy:
        """The policy ENV's value holds (None or "": the default); PolicyError names a bad one."""
        if not value:
            return EMPTY
        try:
            data = json.loads(value)
        except ValueError:
            raise PolicyError(f"{ENV} is not the JSON launchkit writes") from None
        if not isinstance(data, dict):
            raise PolicyError(f"{ENV} is not the JSON launchkit writes")
        data.pop("parent", None)
        unknown = [k for k in data if k not in _FIELDS]
        if unknown:  # a newer launchkit's field: refused rather than half understood
            raise PolicyError(f"{ENV}: unknown field {unknown[0]!r} (a newer launchkit made it)")
        try:
            return cls(**data)
        except (TypeError, ValueError) as e:
            raise PolicyError(f"{ENV}: {e}") from None

    @classmethod
    def from_env(cls, env: Mapping[str, str | None]) -> Policy:
        """The policy of a job's (or a spec's) environment: ENV, else the variables launchkit wrote
        before it (a run launched by an older version, still listed and explained)."""
        value = env.get(ENV)
        if value or not any(env.get(old) for old in _LEGACY.values()):
            return cls.decode(value)
        return _from_legacy(env)


def _seconds(name: str, value: Any) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if seconds < 0 or seconds != seconds:
        raise PolicyError(f"{name}={value!r} must be a number of seconds")
    return seconds


EMPTY = Policy()
_DEFAULTS = {f: getattr(EMPTY, f) for f in _FIELDS}


# What launchkit wrote before the policy (read only, for runs launched then).
_LEGACY = {
    "retry_on": "LAUNCHKIT_RETRY_ON",
    "retry_cap": "LAUNCHKIT_RETRY_CAP",
    "stall_timeout": "LAUNCHKIT_STALL_TIMEOUT",
    "stall_grace": "LAUNCHKIT_STALL_GRACE",
    "inactive_timeout": "LAUNCHKIT_INACTIVE_TIMEOUT",
    "inactive_soft_timeout": "LAUNCHKIT_INACTIVE_SOFT_TIMEOUT",
    "progress_patterns": "LAUNCHKIT_PROGRESS_PATTERNS",
}


def _from_legacy(env: Mapping[str, str | None]) -> Policy:
    values: dict[str, Any] = {f: env.get(name) or None for f, name in _LEGACY.items()}
    causes = values.pop("retry_on") or ""
    cap = values.pop("retry_cap") or "0"
    patterns = values.pop("progress_patterns") or ""
    try:
        return Policy(
            retry_on=[c for c in causes.split(",") if c in CAUSES],
            retry_cap=int(cap) if cap.isdigit() else 0,
            progress_patterns=[p for p in patterns.split("\n") if p],
            **values,
        )
    except PolicyError as e:
        raise PolicyError(f"{e} (as launchkit wrote it before {ENV})") from None
