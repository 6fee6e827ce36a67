"""The session's state: stash keys, and the attributes every part of the session reads.

:class:`SessionState` only declares; :class:`~pytest_hud._plugin.session.HudSession`
sets them and mixes in the parts (recording, collection, reporting) that use them, so
each part is a module of its own and reads the same state.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_hud._plugin.cases import HudCase
from pytest_hud.runtime.rollout import RolloutResult

if TYPE_CHECKING:
    from pytest_hud._plugin.evaluator import Evaluator
    from pytest_hud._plugin.expect import Expectations
    from pytest_hud._plugin.options import HudOptions
    from pytest_hud._plugin.session import HudSession
    from pytest_hud.evaluation.results import Gate
    from pytest_hud.evaluation.verdict import Verdict

__all__ = ["CASE", "PLUGIN", "RESULT", "SessionState", "session_of"]

PLUGIN = pytest.StashKey["HudSession"]()
RESULT = pytest.StashKey[RolloutResult]()
CASE = pytest.StashKey[HudCase]()


def session_of(config: pytest.Config) -> HudSession:
    """The pytest-hud session of this pytest run."""
    return config.stash[PLUGIN]


class SessionState:
    """What a pytest-hud session holds (set by HudSession.__init__)."""

    config: pytest.Config
    options: HudOptions
    is_worker: bool
    artifacts: Path
    evaluator: Evaluator
    expect: Expectations
    baseline: dict[str, Any] | None
    rows: dict[str, dict[str, Any]]
    other_failures: int
    gates: list[Gate]
    verdict: Verdict | None
    finished: set[str]
    _order: list[str]
    _agent_name: str
    _primed: bool  # the first items' substrates were booted ahead (collect.prime)
    record_root: Path | None
    writers: dict[str, Any]
    dataset: str | None
    recording_error: str | None
    sigterm: Any = None  # the SIGTERM handler to restore at unconfigure

    @property
    def agent_label(self) -> str:
        return self.options.checkpoint or self._agent_name

    # parts call each other through these (the mixin that defines each wins)
    def _merged_root(self, row: dict[str, Any]) -> str | None:
        raise NotImplementedError

    def _position(self, nodeid: str) -> int:
        raise NotImplementedError

    def _finish_recording(self) -> None:
        raise NotImplementedError

    # the evaluation features' entry points (features.py: FeaturesMixin)
    def feature_report(self, item: pytest.Item, call: Any, report: Any) -> bool:
        raise NotImplementedError

    def annotate_row(self, row: dict[str, Any]) -> None:
        raise NotImplementedError

    def feature_logreport(self, report: Any) -> None:
        raise NotImplementedError

    def feature_summary(self, tr: Any) -> None:
        raise NotImplementedError

    def feature_gates(self, rows: list[dict[str, Any]]) -> list[Gate]:
        raise NotImplementedError

    def feature_meta(self) -> dict[str, Any]:
        raise NotImplementedError

    def feature_close(self) -> None:
        raise NotImplementedError

    def resume_item(self, item: pytest.Item, case: HudCase) -> None:
        raise NotImplementedError

    def lookahead_filter(self) -> None:
        raise NotImplementedError

    def repro(self, nodeid: str) -> str:
        raise NotImplementedError

    def load_agent(self) -> Any:
        raise NotImplementedError

    def default_provider(self) -> Any:
        raise NotImplementedError

    def abandoned_summary(self, tr: Any) -> None:
        raise NotImplementedError

    def publish_abandoned(self) -> None:
        raise NotImplementedError

    def reap_dead_workers(self) -> None:
        raise NotImplementedError
