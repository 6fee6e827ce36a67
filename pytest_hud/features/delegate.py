"""``--hud-delegate=ray``: each item's whole rollout runs as a Ray task, folded back. Videos and
dataset parts come back only through a folder shared with the controller.
"""

from __future__ import annotations

import functools
import inspect
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_hud._plugin.options import OptionTable, read_option
from pytest_hud.features.recording import parts_dir
from pytest_hud.runtime.provider import Provider
from pytest_hud.runtime.rollout import RolloutResult
from pytest_hud.runtime.task import Task

if TYPE_CHECKING:
    import numpy as np

    from pytest_hud._plugin.session import HudSession
    from pytest_hud.robot.agent.agent import EpisodeObserver
    from pytest_hud.robot.contract import Spaces
    from pytest_hud.robot.record.writer import DatasetWriter
    from pytest_hud.runtime.control import Run

__all__ = ["OPTIONS", "DelegatePlugin", "Delegation", "PartRecorder", "enable"]

OPTIONS: OptionTable = [
    (
        "--hud-delegate",
        "run each item's whole rollout (env server + agent) elsewhere and fold the result "
        "back: ray (a Ray task on --hud-runtime's cluster if ray:..., else RAY_ADDRESS, "
        "else a local cluster)",
        {"choices": ["ray"]},
    ),
]


class PartRecorder:
    """A picklable observer factory: one LeRobot dataset part per delegated episode,
    finalized when the episode ends, under ``parts[env]`` (a shared folder)."""

    def __init__(self, parts: dict[str, str]) -> None:
        self.parts = parts

    def __call__(self, run: Run, spaces: Spaces) -> EpisodeObserver:
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


def _unbatched(agent: object) -> Any:
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
        self, address: str | None, parts: Callable[[], dict[str, str]] | None = None
    ) -> None:
        self.address = address
        self._parts = parts
        self._recorder: PartRecorder | None = None

    def _portable(self, agent: object) -> Any:
        if not isinstance(agent, functools.partial) or "settings" not in agent.keywords:
            return agent
        from pytest_hud.robot.agent.agent import RunSettings

        settings = agent.keywords["settings"]
        keep = [o for o in settings.observers if not inspect.ismethod(o)]
        if self._parts is not None:
            if self._recorder is None:
                self._recorder = PartRecorder(self._parts())
            keep.append(self._recorder)
        portable = RunSettings(
            max_steps=settings.max_steps, observers=tuple(keep), timing=settings.timing
        )
        return functools.partial(_unbatched(agent.func), *agent.args, settings=portable)

    async def __call__(
        self,
        task: Task,
        agent: object,
        provider: Provider,
        *,
        index: int = 0,
        timeout: float | None = None,
    ) -> RolloutResult:
        from pytest_hud.runtime.ray.delegate import delegated_rollout

        return await delegated_rollout(
            task,
            self._portable(agent),
            pinned(provider, task),
            index=index,
            timeout=timeout,
            address=self.address,
        )


class DelegatePlugin:
    """``--hud-delegate=ray``: every rollout of this process runs as a Ray task."""

    def __init__(self, session: HudSession) -> None:
        self.session = session
        address = session.options.runtime_spec.cluster
        recording = session.options.record is not None
        self.delegation = Delegation(address, self._parts if recording else None)

    def _parts(self) -> dict[str, str]:
        """Each env's dataset parts folder, beside the dataset the recording merges into."""
        recording = self.session.config.pluginmanager.get_plugin("pytest-hud-recording")
        assert recording is not None, "--hud-record registers pytest-hud-recording"
        envs = {case.row.env for case in self.session.evaluator.cases.values()}
        return {env: str(parts_dir(recording.dataset_root(env))) for env in envs}

    @pytest.hookimpl
    def pytest_hud_run_rollout(
        self, task: Task, agent: object, provider: Provider, index: int, timeout: float | None
    ) -> Awaitable[RolloutResult]:
        return self.delegation(task, agent, provider, index=index, timeout=timeout)


def enable(session: HudSession) -> object | None:
    """The delegation plugin (``--hud-delegate=ray``), else None; what it cannot run with is
    one usage error naming the fix."""
    where = read_option(session.config, "hud_delegate", str)
    if where is None:
        return None
    if where != "ray":
        raise pytest.UsageError(f"--hud-delegate is ray, got {where!r}")
    options = session.options
    if options.shared is not None:
        raise pytest.UsageError(
            "--hud-delegate runs each rollout whole in its own Ray task, where a Shared "
            "substrate cannot be shared: drop --hud-shared or --hud-delegate"
        )
    if len(options.agents) > 1:
        raise pytest.UsageError(
            f"--hud-delegate is for one agent, got {len(options.agents)} --hud-agent "
            f"({', '.join(options.agents)}); run the arms in this process (or under -n): "
            "drop --hud-delegate"
        )
    session.evaluator.boots_here = False  # each rollout boots its substrate on the cluster
    return DelegatePlugin(session)
