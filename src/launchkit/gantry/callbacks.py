"""gantry 3.7.0's callbacks (`gantry.callbacks`): `Callback`, a dataclass whose hooks run while a
workload is followed (follow_workload, Recipe.launch with logs), and `SlackCallback`.

gantry's Callback is a `dataclass_extensions.Registrable`; the part code written for it uses, `register`
(`@Callback.register("name")`) and the lookups by name, is here without that package."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from launchkit.application import Application
from launchkit.core.redact import url_host_only
from launchkit.gantry.exceptions import GantryInterruptWorkload
from launchkit.notify import SlackNotifier

if TYPE_CHECKING:
    from beaker import Beaker, BeakerDataset, BeakerExperimentSpec, BeakerJob, BeakerWorkload

    from launchkit.gantry.git_utils import GitRepoState

__all__ = ["Callback", "SlackCallback"]

C = TypeVar("C", bound=type)
T = TypeVar("T")


class _Registrable:
    """dataclass_extensions.Registrable's part gantry's callbacks use: `@Callback.register("name")`, the
    lookups by name, and `Callback(type="name", ...)` making the registered class."""

    _registry: ClassVar[dict[str, type[Callback]]] = {}
    registered_name: ClassVar[str | None] = None

    def __new__(cls, *args: Any, type: str | None = None, **kwargs: Any) -> Any:
        if type is not None and type != cls.registered_name:
            return super().__new__(cls.get_registered_class(type))
        return super().__new__(cls)

    @classmethod
    def register(cls, name: str, default: bool = False) -> Callable[[C], C]:
        def add(subclass: C) -> C:
            if not (isinstance(subclass, type) and issubclass(subclass, cls)):
                raise TypeError(f"{subclass!r} must be a subclass of {cls.__name__} to register it")
            if not dataclasses.is_dataclass(subclass):
                raise TypeError(f"class {subclass.__name__} must be a dataclass in order to register it")
            _Registrable._registry[name] = subclass
            subclass.registered_name = name
            return subclass

        return add

    @classmethod
    def get_registered_class(cls, name: str) -> type[Callback]:
        try:
            return _Registrable._registry[name]
        except KeyError:
            raise KeyError(
                f"'{name}' is not registered name for {cls.__name__}. "
                f"Available choices are: {list(_Registrable._registry)}"
            ) from None

    @classmethod
    def get_registered_names(cls) -> list[str]:
        return list(_Registrable._registry)

    @classmethod
    def get_registered_name(cls, subclass: type[_Registrable] | None = None) -> str:
        name = (subclass or cls).registered_name
        if name is None:
            raise ValueError(f"{(subclass or cls).__name__} is not registered")
        return str(name)


@dataclass(kw_only=True)
class Callback(_Registrable):
    """Base class for gantry callbacks: hooks into the launch loop on certain events."""

    type: dataclasses.InitVar[str | None] = dataclasses.field(default=None, kw_only=True, repr=False)

    _beaker: Beaker | None = dataclasses.field(repr=False, init=False, default=None)
    _git_repo: GitRepoState | None = dataclasses.field(repr=False, init=False, default=None)
    _spec: BeakerExperimentSpec | None = dataclasses.field(repr=False, init=False, default=None)
    _workload: BeakerWorkload | None = dataclasses.field(repr=False, init=False, default=None)

    # -- what attach() gives ----------------------------------------------------------------------
    def _attached(self, value: T | None) -> T:
        if value is None:
            raise RuntimeError("Callback has not been attached to a gantry workload yet")
        return value

    @property
    def beaker(self) -> Beaker:
        return self._attached(self._beaker)

    @property
    def git_repo(self) -> GitRepoState:
        return self._attached(self._git_repo)

    @property
    def spec(self) -> BeakerExperimentSpec:
        return self._attached(self._spec)

    @property
    def workload(self) -> BeakerWorkload:
        return self._attached(self._workload)

    def interrupt_workload(self) -> None:
        """Cancels the active workload."""
        raise GantryInterruptWorkload(f"workload interrupted by callback {self.__class__.__name__}")

    def attach(
        self, *, beaker: Beaker, git_repo: GitRepoState, spec: BeakerExperimentSpec, workload: BeakerWorkload
    ) -> None:
        """Runs when a callback is attached to the workload."""
        self._beaker, self._git_repo, self._spec, self._workload = beaker, git_repo, spec, workload

    def detach(self) -> None:
        """Runs when a callback is detached from the workload."""
        self._beaker = self._git_repo = self._spec = self._workload = None

    # -- events -----------------------------------------------------------------------------------
    def on_start(self, job: BeakerJob) -> None:
        """A job of the workload started."""

    def on_log(self, job: BeakerJob, log_line: str, log_time: float) -> None:
        """A log line arrived (`log_time`: seconds since the epoch)."""

    def on_no_new_logs(self, job: BeakerJob) -> None:
        """No new log line lately; at most once per second."""

    def on_start_timeout(self, job: BeakerJob) -> None:
        """The job did not start within the start timeout."""

    def on_timeout(self, job: BeakerJob) -> None:
        """The job did not finish within the timeout."""

    def on_inactive_timeout(self, job: BeakerJob) -> None:
        """The job logged nothing within the inactive timeout."""

    def on_inactive_soft_timeout(self, job: BeakerJob) -> None:
        """The job logged nothing within the inactive soft timeout."""

    def on_preemption(self, job: BeakerJob) -> None:
        """The job was preempted (following goes on with the next one)."""

    def on_cancellation(self, job: BeakerJob | None) -> None:
        """The workload was canceled (by the user, a timeout or a callback)."""

    def on_failure(
        self,
        job: BeakerJob,
        *,
        metrics: dict[str, Any] | None = None,
        results_ds: BeakerDataset | None = None,
    ) -> None:
        """The job failed."""

    def on_success(
        self,
        job: BeakerJob,
        *,
        metrics: dict[str, Any] | None = None,
        results_ds: BeakerDataset | None = None,
    ) -> None:
        """The job succeeded."""


@Callback.register("slack")
@dataclass(kw_only=True)
class SlackCallback(Callback):
    """gantry's Slack messages, posted by launchkit's notifier (a failed post is a warning; the webhook
    URL is never printed)."""

    webhook_url: str

    def __repr__(self) -> str:  # never the URL's path (the credential): its scheme and host
        return f"SlackCallback(webhook_url={url_host_only(self.webhook_url)!r})"

    @property
    def workload_name(self) -> str:
        return f"{self.beaker.user_name}/{self.workload.experiment.name}"

    @property
    def workload_url(self) -> str:
        return str(self.beaker.workload.url(self.workload))

    def _post(self, text: str) -> None:
        link = f"Workload <{self.workload_url}|*{self.workload_name}*>"
        SlackNotifier(Application(), self.webhook_url).post(text.format(link=link))

    def on_start(self, job: BeakerJob) -> None:
        self._post(":check: {link} has started! :runner:")

    def on_start_timeout(self, job: BeakerJob) -> None:
        self._post(":warning: {link} failed to start in time!")

    def on_timeout(self, job: BeakerJob) -> None:
        self._post(":warning: {link} failed to complete in time!")

    def on_inactive_timeout(self, job: BeakerJob) -> None:
        self._post(":zzz: {link} appears to be inactive!")

    def on_inactive_soft_timeout(self, job: BeakerJob) -> None:
        self._post(":zzz: {link} appears to be inactive!")

    def on_preemption(self, job: BeakerJob) -> None:
        self._post(":warning: {link} was preempted!")

    def on_cancellation(self, job: BeakerJob | None) -> None:
        self._post(":warning: {link} was canceled!")

    def on_failure(
        self,
        job: BeakerJob,
        *,
        metrics: dict[str, Any] | None = None,
        results_ds: BeakerDataset | None = None,
    ) -> None:
        self._post(":check-failed: {link} failed!")

    def on_success(
        self,
        job: BeakerJob,
        *,
        metrics: dict[str, Any] | None = None,
        results_ds: BeakerDataset | None = None,
    ) -> None:
        self._post(":check: {link} succeeded!")
