"""``--hud-delegate=ray``: each item's whole rollout runs as a Ray task, folded back. Videos and
dataset parts come back only through a folder shared with the controller.
"""

from __future__ import annotations

import dataclasses
import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

import pytest

from pytest_hud._plugin.feature_api import FeatureSettings, Hud, HudOptions, option
from pytest_hud.runtime.provider import Provider
from pytest_hud.runtime.rollout import Agent, RolloutOptions, RolloutResult
from pytest_hud.runtime.task import Task

if TYPE_CHECKING:
    import numpy as np

    from pytest_hud.robot.agent.agent import EpisodeObserver, RobotAgent
    from pytest_hud.robot.contract import Spaces
    from pytest_hud.robot.episode import EpisodeRun
    from pytest_hud.robot.record.writer import DatasetWriter

__all__ = ["DelegatePlugin", "Delegation", "PartRecorder", "Settings", "configure", "enable"]


class Settings(FeatureSettings):
    delegate: str | None = option(
        "--hud-delegate",
        "run each item's whole rollout (env server + agent) elsewhere and fold the result "
        "back: ray (a Ray task on --hud-runtime's cluster if ray:..., else RAY_ADDRESS, "
        "else a local cluster)",
        choices=("ray",),
        check=lambda v: None if v == "ray" else f"is ray, got {v!r}",
    )


def configure(settings: Settings, options: HudOptions) -> HudOptions:
    """Delegated rollouts boot their substrates where they run, not here; what cannot be
    delegated is one usage error naming the fix."""
    if settings.delegate is None:
        return options
    if options.shared is not None:
        raise pytest.UsageError(
            "--hud-delegate runs each rollout whole in its own Ray task, where a Shared "
            "substrate cannot be shared: drop --hud-shared or --hud-delegate"
        )
    if len(options.agents) > 1:
        raise pytest.UsageError(
            f"--hud-delegate is for one agent, got {len(options.agents)} --hud-agent "
            f"({', '.join(options.agent_texts)}); run the arms in this process (or under -n): "
            "drop --hud-delegate"
        )
    return dataclasses.replace(options, boots_here=False)


class PartRecorder:
    """A picklable observer factory: one LeRobot dataset part per delegated episode,
    finalized when the episode ends, under ``parts[env]`` (a shared folder)."""

    def __init__(self, parts: dict[str, str]) -> None:
        self.parts = parts

    def __call__(self, run: EpisodeRun | None, spaces: Spaces) -> EpisodeObserver:
        if run is None:
            raise ValueError("a recorded episode needs its run: the row names its dataset")
        from pytest_hud.robot.record.writer import DatasetWriter

        root = Path(self.parts[run.task.env]) / f"ray-{uuid.uuid4().hex[:12]}"
        writer = DatasetWriter(root)
        return _FinalizingRecorder(writer, writer.observer(run, spaces))


class _FinalizingRecorder:
    """``inner``, the episode's recorder, whose part ``writer`` finalizes at its end."""

    def __init__(self, writer: DatasetWriter, inner: EpisodeObserver) -> None:
        self.writer = writer
        self.inner = inner

    def step(self, data: dict[str, object], action: np.ndarray) -> None:
        self.inner.step(data, action)

    def end(self, ok: bool) -> dict[str, object]:
        out = dict(self.inner.end(ok) or {})
        self.writer.finalize()
        return out


def pinned(provider: Provider, task: Task) -> Provider:
    """The concrete provider a by-declaration router would pick for ``task`` (else itself)."""
    pick = getattr(provider, "pick", None)
    return pick(task) if callable(pick) else provider


def _unbatched(agent: RobotAgent) -> RobotAgent:
    """The agent without its ``--hud-concurrency`` batching: each delegated rollout runs
    alone in its worker, where a BatchedModel's queue and threads would batch nothing."""
    import copy

    from pytest_hud.robot.agent.batching import BatchedAgent

    if not isinstance(agent, BatchedAgent):
        return agent
    plain = copy.copy(agent.agent)
    plain.model = agent.batched.model
    return plain


class Delegation:
    """Drop-in for ``rollout()`` that runs the rollout as a Ray task (see the module docs).

    ``parts`` (called once, after collection) maps each env to the folder its dataset
    parts go to, or is None when not recording.
    """

    def __init__(
        self, address: str | None, parts: Callable[[], Mapping[str, str] | None] | None = None
    ) -> None:
        self.address = address
        self._parts = parts
        self._recorder: PartRecorder | None = None

    def _portable(self, agent: Agent) -> Agent:
        """The agent as a Ray task can carry it: the session's settings without observers
        bound to this process (a progress line's), plus the dataset part recorder."""
        from pytest_hud.robot.agent.agent import ConfiguredAgent

        if not isinstance(agent, ConfiguredAgent):
            return agent
        settings = agent.settings
        keep = [o for o in settings.observers if not inspect.ismethod(o)]
        if self._parts is not None and self._recorder is None:
            parts = self._parts()
            if parts is not None:  # the session records
                self._recorder = PartRecorder(dict(parts))
        if self._recorder is not None:
            keep.append(self._recorder)
        portable = dataclasses.replace(settings, observers=tuple(keep))
        return ConfiguredAgent(_unbatched(agent.agent), portable)

    async def __call__(
        self, task: Task, agent: Agent, provider: Provider, **options: Unpack[RolloutOptions]
    ) -> RolloutResult:
        from pytest_hud.runtime.ray.delegate import delegated_rollout

        portable, placed = self._portable(agent), pinned(provider, task)
        return await delegated_rollout(task, portable, placed, address=self.address, **options)


class DelegatePlugin:
    """``--hud-delegate=ray``: every rollout of this process runs as a Ray task."""

    def __init__(self, hud: Hud) -> None:
        def parts() -> Mapping[str, str] | None:  # where a recording session wants parts
            found: Mapping[str, str] | None = hud.config.hook.pytest_hud_dataset_parts(
                config=hud.config
            )
            return found

        self.delegation = Delegation(hud.options.runtime.cluster, parts)

    @pytest.hookimpl
    def pytest_hud_run_rollout(
        self, task: Task, agent: Agent, provider: Provider, index: int, timeout: float | None
    ) -> Awaitable[RolloutResult]:
        return self.delegation(task, agent, provider, index=index, timeout=timeout)


def enable(settings: Settings, hud: Hud) -> DelegatePlugin | None:
    """The delegation plugin (``--hud-delegate=ray``), else None."""
    return None if settings.delegate is None else DelegatePlugin(hud)
