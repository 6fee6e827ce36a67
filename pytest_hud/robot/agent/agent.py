"""RobotAgent: drives one env over the robot wire with a Model, chunk by chunk. Per-episode state
lives in the episode, so one agent serves any number of concurrent rollouts.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypedDict

import numpy as np

from pytest_hud.errors import ModelOutputError
from pytest_hud.robot.agent.adapter import Adapter
from pytest_hud.robot.agent.ensembler import Ensembler
from pytest_hud.robot.agent.model import EPISODE_TASK, Model, Row, check_chunk
from pytest_hud.robot.agent.timed import INSTRUCTION, STOP, TimedCounters, Timing, run_timed
from pytest_hud.robot.contract import Spaces
from pytest_hud.robot.episode import EpisodeReport, EpisodeRun
from pytest_hud.robot.wire.client import Observed, RobotClient

__all__ = [
    "STEPS_ALONE",
    "ConfiguredAgent",
    "EpisodeArgs",
    "EpisodeObserver",
    "EpisodeReport",
    "ObserverFactory",
    "RobotAgent",
    "RunSettings",
]

#: True inside an episode whose sim steps its slot without waiting for other slots (the
#: bridge's ``slots_step_alone``): a BatchedModel may then run part of the rows while
#: the rest step (see :mod:`pytest_hud.robot.agent.batching`).
STEPS_ALONE: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "pytest_hud_steps_alone", default=False
)


class EpisodeObserver(Protocol):
    """Sees every executed tick of one episode (video capture, dataset recording).

    An observer may also define ``outcome(reward, terminated)``: called after each step
    with what the env answered to the action just passed to ``step`` (the reward, None
    when the env sends none, and whether the episode ended).

    An observer whose ``end`` touches only its own data (encoding a file) may set
    ``end_in_thread = True``: its ``end`` then runs on a worker thread, after the episode's
    connection closed, so the event loop keeps stepping the other rollouts meanwhile. An
    encode on the loop would hold every other rollout (and the batched forward's next
    rows) for as long as it takes."""

    def step(self, data: dict[str, object], action: np.ndarray) -> None: ...

    def end(self, ok: bool) -> Mapping[str, object]: ...


#: Makes an observer for one episode from the run (None: an episode driven without one, from
#: a capability alone) and the env's spaces.
ObserverFactory = Callable[[EpisodeRun | None, Spaces], EpisodeObserver]


@dataclass(frozen=True)
class RunSettings:
    """Settings of one rollout, chosen by whoever runs it (the plugin: ``--hud-max-steps``,
    the episode video, the progress line, dataset recording). They travel with the call
    (``agent(run, settings)``), so the user's agent object comes back as it was made."""

    #: Overrides the agent's ``max_steps`` when set.
    max_steps: int | None = None
    #: Observer factories run in addition to the agent's own ``observers``.
    observers: tuple[ObserverFactory, ...] = ()
    #: A timed loop (``--hud-realtime``, ``--hud-latency``); None: lockstep, each tick waits
    #: for the policy.
    timing: Timing | None = None


class EpisodeArgs(TypedDict, total=False):
    """:meth:`RobotAgent.run_episode`'s keywords, as an agent that wraps the episode (a
    batched model's session, a vla-eval server's episode) takes them and passes them on."""

    token: str | None
    prompt: str
    run: EpisodeRun | None
    settings: RunSettings | None


@dataclass(frozen=True)
class ConfiguredAgent:
    """An agent as a session's rollouts call it: the agent the user made, unchanged, and the
    session's :class:`RunSettings`, which travel with each call."""

    agent: RobotAgent
    settings: RunSettings

    async def __call__(self, run: EpisodeRun) -> EpisodeReport:
        return await self.agent(run, self.settings)


class RobotAgent:
    """Subclasses set ``model`` and ``adapter`` (None: pass-through)."""

    model: Model
    adapter: Adapter | None = None
    ensembler: Ensembler | None = None
    #: Keep only the first ``chunk_size`` actions of each chunk (None: all of it).
    chunk_size: int | None = None
    #: Stop after this many ticks even if the env has not terminated (None: never).
    max_steps: int | None = None
    #: Seconds to wait for any single observation.
    step_timeout: float | None = 300.0
    name: str = "agent"

    def __init__(
        self,
        model: Model | None = None,
        adapter: Adapter | None = None,
        *,
        ensembler: Ensembler | None = None,
        chunk_size: int | None = None,
        max_steps: int | None = None,
        name: str | None = None,
    ) -> None:
        # the class's attributes are the defaults (a subclass sets its own): a value given
        # overrides them on this agent
        given: dict[str, object] = {"model": model, "adapter": adapter, "ensembler": ensembler}
        given |= {"chunk_size": chunk_size, "max_steps": max_steps, "name": name}
        for attribute, value in given.items():
            if value is not None:
                setattr(self, attribute, value)
        self.observers: list[ObserverFactory] = []

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} model={type(self.model).__name__}>"

    async def aclose(self) -> None:
        """Release what the model keeps between episodes (:meth:`Model.aclose`)."""
        model = getattr(self, "model", None)
        if model is not None:
            await model.aclose()

    async def __call__(self, run: EpisodeRun, settings: RunSettings | None = None) -> EpisodeReport:
        """The Agent protocol of the scheduler: drive one started Run."""
        return await self.run_episode(
            run.robot, token=run.robot_token, prompt=run.prompt, run=run, settings=settings
        )

    async def run_episode(
        self,
        capability: str | dict[str, object],
        *,
        token: str | None = None,
        prompt: str = "",
        run: EpisodeRun | None = None,
        settings: RunSettings | None = None,
    ) -> EpisodeReport:
        settings = settings or RunSettings()
        max_steps = self.max_steps if settings.max_steps is None else settings.max_steps
        report = EpisodeReport()
        start = time.monotonic()
        client = await RobotClient.connect(capability, token=token, timeout=self.step_timeout)
        observers: list[EpisodeObserver] = []
        ok = False
        alone = STEPS_ALONE.set(bool(client.metadata.get("slots_step_alone")))
        owner = EPISODE_TASK.set(asyncio.current_task())
        try:
            spaces = client.spaces()
            adapter = (self.adapter or Adapter()).bind(spaces)
            self.model.bind(spaces)
            size = spaces.action_feature.size
            factories = [*self.observers, *settings.observers]
            observers = [factory(run, spaces) for factory in factories]
            base = self.ensembler or getattr(self.model, "ensembler", None)
            ensembler = base.fresh() if base is not None else None
            queue: deque[np.ndarray] = deque()
            history = max(1, int(getattr(self.model, "n_obs_steps", 1) or 1))
            recent: deque[dict[str, object]] = deque(maxlen=history)
            obs = await client.get_observation()
            total = 0.0
            keep = self.chunk_size or getattr(self.model, "n_action_steps", None)
            model_name = type(self.model).__name__

            told = INSTRUCTION.get()  # an operator's instruction overrides the prompt

            def infer() -> Awaitable[np.ndarray]:
                said = (told() if told is not None else "") or prompt
                row = _row(adapter, recent, history, said)  # the observations as of now
                return forward(row)

            async def forward(row: Row) -> np.ndarray:
                t0 = time.monotonic()
                raw = await self.model.ainfer(row)
                chunk = adapter.action(check_chunk(raw, 1, size, model_name)[0])
                report.infer_s += time.monotonic() - t0
                report.inferences += 1
                return chunk

            async def act(action: np.ndarray) -> Observed:
                nonlocal total
                for observer in observers:
                    observer.step(recent[-1], action)
                t1 = time.monotonic()
                frame = await client.step(action)
                report.env_s += time.monotonic() - t1
                report.steps += 1
                reward = frame.get("reward")
                total += float(reward or 0.0)
                for observer in observers:
                    outcome = getattr(observer, "outcome", None)
                    if outcome is not None:
                        outcome(reward, bool(frame["terminated"]))
                if not frame["terminated"]:
                    recent.append(frame["data"])
                return frame

            def steps_left(steps: int) -> bool:
                if max_steps is not None and steps >= max_steps:
                    report.truncated_by_agent = True
                    return False
                return True

            if not obs["terminated"]:
                recent.append(obs["data"])
            if settings.timing is not None:
                if ensembler is not None:
                    raise ModelOutputError(
                        f"{model_name} ensembles its chunks every tick, which a timed loop "
                        "(--hud-realtime, --hud-latency) cannot do: it sends a chunk's actions "
                        "while the next is computed. Fix: run without an ensembler (e.g. "
                        "ACT's temporal_ensemble_coeff=None) or without the timed loop"
                    )
                clock = settings.timing.clock(client.control_rate)
                counters = TimedCounters()
                obs = await run_timed(
                    obs,
                    infer,
                    act,
                    clock,
                    keep=keep,
                    ahead=settings.timing.ahead,
                    steps_left=steps_left,
                    counters=counters,
                )
                report.extra["timing"] = counters.summary(clock, settings.timing)
                if counters.stopped:
                    report.extra["stopped"] = "operator"
            else:
                stop = STOP.get()
                while not obs["terminated"] and steps_left(report.steps):
                    if stop is not None and stop():
                        report.extra["stopped"] = "operator"
                        break
                    need = ensembler.wants_chunk if ensembler is not None else not queue
                    if need:
                        chunk = await infer()
                        if ensembler is not None:
                            ensembler.update(chunk)
                        else:
                            queue.extend(chunk[:keep] if keep else chunk)
                    action = ensembler.next() if ensembler is not None else queue.popleft()
                    obs = await act(action)
            report.terminated = bool(obs["terminated"])
            report.total_reward = total
            ok = True
        finally:
            STEPS_ALONE.reset(alone)
            EPISODE_TASK.reset(owner)
            off_loop = [o for o in observers if getattr(o, "end_in_thread", False)]
            for observer in observers:
                if observer not in off_loop:
                    report.extra.update(observer.end(ok))
            await client.close()
            if off_loop:
                for extra in await asyncio.to_thread(_end_all, off_loop, ok):
                    report.extra.update(extra)
            report.wall_s = time.monotonic() - start
        return report


def _end_all(observers: list[EpisodeObserver], ok: bool) -> list[Mapping[str, object]]:
    return [observer.end(ok) for observer in observers]


def _row(adapter: Adapter, recent: deque[dict[str, object]], history: int, prompt: str) -> Row:
    """The model's row: the latest observation, or with ``history > 1`` the last
    ``history`` ones stacked per array (the episode's first repeated until there are
    enough), each through the adapter; other values (the prompt) from the latest."""
    if history == 1:
        return adapter.observation(recent[-1], prompt)
    steps = [recent[0]] * (history - len(recent)) + list(recent)
    rows = [adapter.observation(data, prompt) for data in steps]
    return {
        key: np.stack([np.asarray(r[key]) for r in rows])
        if isinstance(value, np.ndarray)
        else value
        for key, value in rows[-1].items()
    }
