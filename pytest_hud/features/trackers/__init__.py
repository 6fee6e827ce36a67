"""``--hud-log=...``: the finished results, logged to each tracker at the training step; a tracker
that fails is one warning, never a failure.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin.options import OptionTable, read_option
from pytest_hud.robot.agent.registry import AgentSpec

if TYPE_CHECKING:
    from pytest_hud._plugin.session import HudSession
    from pytest_hud.evaluation.results import ResultsDocument

__all__ = ["OPTIONS", "TrackerPlugin", "enable", "read_trackers"]

OPTIONS: OptionTable = [
    (
        "--hud-log",
        "log the session's figures (success with intervals per task, score, steps, "
        "errors, gates, a few episode videos, provenance) to a tracker: wandb, "
        "tensorboard, mlflow or trackio (repeatable, or comma-separated)",
        {"action": "append"},
    ),
    (
        "--hud-log-step",
        "the x value (training step) to log at (default: the NNNNNN of a lerobot "
        "checkpoints/NNNNNN/ path, else 0)",
        {"type": int},
    ),
    (
        "--hud-log-dir",
        "where offline trackers write (TensorBoard events, MLflow's SQLite store, wandb's "
        "run files) when they have no configuration of their own (default: .hud/trackers)",
        {},
    ),
    (
        "--hud-log-run",
        "one tracker run that sessions naming it add to, created by the first (wandb run "
        "id, MLflow run name, TensorBoard subfolder, trackio run name; default: a new run "
        "per session named after the agent)",
        {},
    ),
]


def read_trackers(config: pytest.Config) -> list[str]:
    """The ``--hud-log`` tracker names (validated: an unknown one is a usage error)."""
    from pytest_hud.trackers import TrackerError, parse_names

    raw: list[str] | None = config.getoption("hud_log")
    if not raw:
        ini = config.getini("hud_log")
        raw = str(ini).split() if ini not in (None, "", []) else []
    try:
        return parse_names(raw)
    except TrackerError as exc:
        raise pytest.UsageError(str(exc)) from None


class TrackerPlugin:
    """Logs the results document to the named trackers once the session is done."""

    def __init__(self, names: list[str], directory: Path, step: int | None, run: str) -> None:
        self.names, self.directory, self.step, self.run = names, directory, step, run
        self.logged: list[str] = []
        self.problems: list[str] = []

    def pytest_hud_results(self, config: pytest.Config, document: ResultsDocument) -> None:
        from pytest_hud.trackers import TrackerWarning, figures_of, log_figures

        shared = config.getoption("hud_log_run", None) or config.getini("hud_log_run")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TrackerWarning)
            self.logged = log_figures(
                self.names,
                figures_of(document, step=self.step),
                directory=self.directory,
                run_name=str(shared) if shared else self.run,
                resume=bool(shared),
            )
        self.problems = [str(w.message) for w in caught if issubclass(w.category, TrackerWarning)]

    def pytest_hud_terminal_summary(
        self, terminalreporter: pytest.TerminalReporter, config: pytest.Config
    ) -> None:
        if self.logged:
            at = f" at step {self.step}" if self.step is not None else ""
            terminalreporter.write_line(f"hud log: {', '.join(self.logged)}{at}")
        for problem in self.problems:
            terminalreporter.write_line(f"hud log: WARNING {problem}", yellow=True)


def enable(session: HudSession) -> object | None:
    """The tracker plugin (``--hud-log``, on the controller), else None; an unknown tracker
    name is a usage error in every process."""
    config = session.config
    names = read_trackers(config)
    agents = session.options.agents
    if names and len(agents) > 1:
        raise pytest.UsageError(
            f"--hud-log is for one agent, got {len(agents)} --hud-agent ({', '.join(agents)}); "
            "log each agent from a session of its own: drop --hud-log"
        )
    if not names or session.is_worker:
        return None
    step = read_option(config, "hud_log_step", int)
    if step is None:
        step = AgentSpec(session.options.agent).step
    folder = read_option(config, "hud_log_dir", str)
    where = Path(folder) if folder else session.artifacts / "trackers"
    return TrackerPlugin(names, where, step, session.agent_label)
