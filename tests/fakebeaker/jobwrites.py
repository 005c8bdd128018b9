"""A job writing its own experiment's description, as two of AI2's training codebases do while they
train (fact sheet 11.8). Each writer runs as the job: a beaker-py client of the job's user (a job
reads BEAKER_TOKEN from a secret) and the job's environment (`State.job_env(job)`:
`BEAKER_EXPERIMENT_ID`, `BEAKER_WORKLOAD_ID`), sending `UpdateWorkload` over the wire; the texts are
the codebases' own, byte for byte.

- OLMo-core, `BeakerCallback` (allenai/OLMo-core `src/olmo_core/train/callbacks/beaker.py`,
  `_set_description`): on by itself whenever `BEAKER_EXPERIMENT_ID` is set, it replaces the WHOLE
  description at the start of training, every metrics interval (at most once per 10 s) and at the
  end, with `[{progress}] {description}\\n{url}` stripped: `progress` is `37%, 1,234/3,000` in the
  callback's first form (`_set_description(step, max_steps)`) and `TrainingProgress.__str__`
  (`src/olmo_core/train/common.py`) in its later one, `37% complete (step 1,234/3,000)` (and an
  `, eta ...` the fake leaves out);
  `description` is the callback's own setting (None by default: then no line), `url` the W&B or
  Comet run's.
- open-instruct, `maybe_update_beaker_description` (allenai/open-instruct `open_instruct/utils.py`,
  called by its BeakerCallbackV2 and training loops): reads the workload and its spec
  (`GetExperimentYamlSpec`), keeps the spec's description up to any `git_commit:` as the original
  (cached per experiment: the first one read wins), and writes `original git_commit: C git_branch: B
  [wandb_url] [P.P% complete (step S/T), eta X]` joined by spaces: anything added to the description
  after its first read is dropped at the next update.
"""

from __future__ import annotations

from typing import Any


def olmo_core_progress(step: int, max_steps: int | None, *, form: int = 1) -> str:
    """OLMo-core's progress text: form 1, `_set_description(step, max_steps)`; form 2, TrainingProgress
    without a time estimate (its `, eta ...` suffix is left out here)."""
    if max_steps is None:
        return f"{step:,d}/??"
    perc = min(100, int(100 * step / max_steps))
    return (
        f"{perc}%, {step:,d}/{max_steps:,d}"
        if form == 1
        else f"{perc}% complete (step {step:,d}/{max_steps:,d})"
    )


def olmo_core_description(progress: str, description: str | None = None, url: str | None = None) -> str:
    """`BeakerCallback._set_description`'s text."""
    text = f"[{progress}] "
    if description is not None:
        text = f"{text}{description}\n"
    if url is not None:
        text = f"{text}{url} "
    return text.strip()


class OLMoCoreCallback:
    """OLMo-core's `BeakerCallback` as a job runs it (rank 0): `update(step, max_steps)`."""

    def __init__(
        self, client: Any, env: dict[str, str], *, description: str | None = None, url: str | None = None
    ):
        self.client, self.experiment_id = client, env["BEAKER_EXPERIMENT_ID"]
        self.description, self.url = description, url

    def update(self, step: int, max_steps: int | None, *, form: int = 1) -> str:
        text = olmo_core_description(
            olmo_core_progress(step, max_steps, form=form), self.description, self.url
        )
        self.client.workload.update(self.client.workload.get(self.experiment_id), description=text)
        return text


def format_eta(seconds: float) -> str:
    """open-instruct's `format_eta`."""
    seconds = int(seconds)
    days, hours, minutes = seconds // 86400, (seconds % 86400) // 3600, (seconds % 3600) // 60
    if days > 0:
        return f"{days}d {hours}h {minutes}m"
    if hours > 0:
        return f"{hours}h {minutes}m"
    return f"{minutes}m"


class OpenInstructCallback:
    """open-instruct's `maybe_update_beaker_description` as a job calls it: `update(step, total, elapsed)`
    (elapsed: seconds since training started; open-instruct reads its own perf_counter)."""

    def __init__(
        self,
        client: Any,
        env: dict[str, str],
        *,
        git_commit: str = "unknown",
        git_branch: str = "unknown",
        wandb_url: str | None = None,
    ):
        self.client, self.workload_id = client, env["BEAKER_WORKLOAD_ID"]
        self.git_commit, self.git_branch, self.wandb_url = git_commit, git_branch, wandb_url
        self.original_descriptions: dict[str, str] = {}

    def update(
        self, current_step: int | None = None, total_steps: int | None = None, elapsed: float = 0.0
    ) -> str | None:
        workload = self.client.workload.get(self.workload_id)
        try:
            spec = self.client.experiment.get_spec(workload)
        except ValueError:  # (open-instruct: warns, and leaves the description as it is)
            return None
        if self.workload_id not in self.original_descriptions:
            raw = spec.description or ""
            if "git_commit:" in raw:
                raw = raw.split("git_commit:")[0].strip()
            self.original_descriptions[self.workload_id] = raw
        parts = [
            self.original_descriptions[self.workload_id],
            f"git_commit: {self.git_commit}",
            f"git_branch: {self.git_branch}",
        ]
        if self.wandb_url:
            parts.append(self.wandb_url)
        if current_step is not None:
            assert total_steps is not None
            pct = (current_step / total_steps) * 100
            if current_step >= total_steps:
                time_str, label = format_eta(elapsed), "finished in"
            else:
                eta = elapsed / current_step * (total_steps - current_step) if current_step > 0 else None
                time_str, label = (format_eta(eta) if eta is not None else "calculating..."), "eta"
            parts.append(f"[{pct:.1f}% complete (step {current_step}/{total_steps}), {label} {time_str}]")
        text = " ".join(parts)
        self.client.workload.update(workload, description=text)
        return text
