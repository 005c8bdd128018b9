"""What the launch asked of the job's environment (the LAUNCHKIT_* variables of docs/runtime.md) and
where to install it: read once by pyenv.py, keyed on by projectbuild.py."""

from __future__ import annotations

from .plan import extra_flags, sync_group_flags

TYPE_CHECKING = False  # (typing costs a job's start-up ~10 ms: for the type checker only)
if TYPE_CHECKING:
    from typing import Mapping, Sequence


class Settings:
    """What the launch asked for (the LAUNCHKIT_* variables of docs/runtime.md) and where to install."""

    def __init__(
        self,
        venv: str,
        extras: Sequence[str] = (),
        all_extras: bool = False,
        groups: Sequence[str] = (),
        all_groups: bool = False,
        no_default_groups: bool = False,
        system: bool = False,
        python_version: str = "",
        image_venv: bool = False,
        uv_leaves_project: bool = False,
        local_run: bool = False,
    ) -> None:
        self.venv = venv
        self.extras = list(extras)
        self.all_extras = all_extras
        self.groups = list(groups)
        self.all_groups = all_groups
        self.no_default_groups = no_default_groups
        self.system = system  # --system-python: the image's interpreter
        self.python_version = python_version
        self.image_venv = image_venv  # --uv-venv: an existing venv of the image
        self.uv_leaves_project = uv_leaves_project  # UV_NO_EDITABLE & co: how uv installs it is the user's
        self.local_run = local_run  # the checkout's path is new every run: no build stored is reused

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], venv: str) -> Settings:
        def on(name: str) -> bool:
            return environ.get(name, "") == "1"

        return cls(
            venv=venv,
            extras=environ.get("LAUNCHKIT_UV_EXTRAS", "").split(),
            all_extras=on("LAUNCHKIT_UV_ALL_EXTRAS"),
            groups=environ.get("LAUNCHKIT_UV_GROUPS", "").split(),
            all_groups=on("LAUNCHKIT_UV_ALL_GROUPS"),
            no_default_groups=on("LAUNCHKIT_UV_NO_DEFAULT_GROUPS"),
            system=on("LAUNCHKIT_SYSTEM_PYTHON"),
            python_version=environ.get("LAUNCHKIT_PYTHON_VERSION", ""),
            image_venv=bool(environ.get("LAUNCHKIT_UV_VENV")),
            local_run=bool(environ.get("LAUNCHKIT_LOCAL_RUN")),
            uv_leaves_project=any(
                environ.get(v) for v in ("UV_NO_EDITABLE", "UV_NO_INSTALL_PROJECT", "UV_NO_INSTALL_WORKSPACE")
            ),
        )

    def extra_flags(self) -> list[str]:
        return extra_flags(self.extras, self.all_extras)

    def group_flags(self) -> list[str]:  # for `uv sync`
        return sync_group_flags(self.groups, self.all_groups, self.no_default_groups)

    def target(self) -> list[str]:  # for `uv pip`
        return ["--system", "--break-system-packages"] if self.system else []
