"""``--hud-log=...``: the finished results, logged to each tracker at the training step; a tracker
that fails is one warning, never a failure. The trackers themselves: :mod:`.figures` (what is
logged, and the table of trackers) and one module each.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin.feature_api import FeatureSettings, Hud, option, path_option

if TYPE_CHECKING:
    from pytest_hud.evaluation.results import ResultsDocument

__all__ = ["Settings", "TrackerPlugin", "enable"]


def _names(text: str) -> list[str]:
    """One ``--hud-log`` value (comma-separated names), checked against the trackers."""
    from pytest_hud.features.trackers.figures import TrackerError, parse_names

    try:
        return parse_names([text])
    except TrackerError as exc:
        raise ValueError(str(exc)) from None


class Settings(FeatureSettings):
    log: tuple[list[str], ...] = option(
        "--hud-log",
        "log the session's figures (success with intervals per task, score, steps, "
        "errors, gates, a few episode videos, provenance) to a tracker: wandb, "
        "tensorboard, mlflow or trackio (repeatable, or comma-separated)",
        kind="list",
        default=(),
        parse=_names,
    )
    log_step: int | None = option(
        "--hud-log-step",
        "the x value (training step) to log at (default: the NNNNNN of a lerobot "
        "checkpoints/NNNNNN/ path, else 0)",
        parse=int,
    )
    log_dir: Path | None = path_option(
        "--hud-log-dir",
        "where offline trackers write (TensorBoard events, MLflow's SQLite store, wandb's "
        "run files) when they have no configuration of their own (default: .hud/trackers)",
    )
    log_run: str | None = option(
        "--hud-log-run",
        "one tracker run that sessions naming it add to, created by the first (wandb run "
        "id, MLflow run name, TensorBoard subfolder, trackio run name; default: a new run "
        "per session named after the agent)",
    )

    @property
    def trackers(self) -> list[str]:
        """Every tracker named, once each, in the order given."""
        return list(dict.fromkeys(name for names in self.log for name in names))


class TrackerPlugin:
    """Logs the results document to the named trackers once the session is done."""

    def __init__(self, settings: Settings, directory: Path, step: int | None, run: str) -> None:
        self.names, self.directory, self.step = settings.trackers, directory, step
        self.run, self.shared = run, settings.log_run
        self.logged: list[str] = []
        self.problems: list[str] = []

    @pytest.hookimpl
    def pytest_hud_results(self, document: ResultsDocument) -> None:
        from pytest_hud.features.trackers.figures import TrackerWarning, figures_of, log_figures

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TrackerWarning)
            self.logged = log_figures(
                self.names,
                figures_of(document, step=self.step),
                directory=self.directory,
                run_name=self.shared or self.run,
                resume=bool(self.shared),
            )
        self.problems = [str(w.message) for w in caught if issubclass(w.category, TrackerWarning)]

    @pytest.hookimpl
    def pytest_hud_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.logged:
            at = f" at step {self.step}" if self.step is not None else ""
            terminalreporter.write_line(f"hud log: {', '.join(self.logged)}{at}")
        for problem in self.problems:
            terminalreporter.write_line(f"hud log: WARNING {problem}", yellow=True)


def enable(settings: Settings, hud: Hud) -> TrackerPlugin | None:
    """The tracker plugin (``--hud-log``, on the controller), else None."""
    agents = hud.options.agents
    if settings.trackers and len(agents) > 1:
        raise pytest.UsageError(
            f"--hud-log is for one agent, got {len(agents)} --hud-agent "
            f"({', '.join(hud.options.agent_texts)}); log each agent from a session of its "
            "own: drop --hud-log"
        )
    if not settings.trackers or hud.is_worker:
        return None
    step = settings.log_step if settings.log_step is not None else hud.options.agent.step
    where = settings.log_dir or hud.artifacts / "trackers"
    return TrackerPlugin(settings, where, step, hud.agent_label)
