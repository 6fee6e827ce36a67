"""One rollout, the atom every scheduler runs: place, start, act, grade. Anything raised on the
way is the rollout's error, never a failed episode.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypedDict

from pytest_hud.errors import TemplateError
from pytest_hud.plumbing.tracebacks import format_exc
from pytest_hud.robot.episode import EpisodeReport
from pytest_hud.runtime.control import ControlClient, Run
from pytest_hud.runtime.control_pool import current_pool
from pytest_hud.runtime.provider import Provider
from pytest_hud.runtime.shared import Shared
from pytest_hud.runtime.task import Task

__all__ = ["Agent", "Phase", "RolloutOptions", "RolloutResult", "rollout"]

#: where a rollout's error happened: placing the substrate, starting the template, the
#: agent's episode, grading, waiting for the result, or a delegated rollout's transport
Phase = Literal["place", "start", "agent", "grade", "wait", "delegate"]

#: An agent acts on a started Run and may say what it saw: a RobotAgent's EpisodeReport
#: (steps, timings, ...), or a mapping of the same fields from an agent of one's own.
Agent = Callable[[Run], Awaitable[EpisodeReport | Mapping[str, Any] | None]]


class RolloutOptions(TypedDict, total=False):
    """:func:`rollout`'s keywords, as a scheduler running it elsewhere takes and passes them."""

    index: int
    timeout: float | None
    connect_timeout: float


@dataclass
class RolloutResult:
    """The outcome of one rollout of one task (``index`` counts repeats)."""

    task: Task
    index: int = 0
    score: float | None = None
    success: bool | None = None
    total_reward: float | None = None
    steps: int | None = None
    duration: float = 0.0
    prompt: str = ""
    error: str | None = None
    error_type: str | None = None
    phase: Phase | None = None  # where an error happened
    grade: dict[str, Any] = field(default_factory=dict)
    agent_info: dict[str, Any] = field(default_factory=dict)
    #: the name reports use (the pytest item's id, e.g. ``cartpole/balance[seed:0][3]``),
    #: so a failure message names the item as its node id does
    label: str | None = None

    def __repr__(self) -> str:
        return f"<RolloutResult {self.summary()}>"

    @property
    def video(self) -> str | None:
        """Path of the episode's animation (first camera), when one was captured."""
        return self.agent_info.get("video")

    @property
    def dataset(self) -> dict[str, Any] | None:
        """The recorded dataset episode (``root``, ``episode_index``), when recording."""
        return self.agent_info.get("dataset")

    @property
    def ok(self) -> bool:
        """Graded without an error (success may still be False)."""
        return self.error is None

    def summary(self) -> str:
        name = self.label or f"{self.task.key}[{self.index}]"
        if self.error is not None:
            return f"{name} errored in {self.phase}: {self.error_type}"
        return (
            f"{name}: success={self.success} score={self.score} "
            f"steps={self.steps} reward={self.total_reward} in {self.duration:.2f}s"
        )

    def report_fields(self) -> dict[str, Any]:
        """The result as reports show it (the plugin's rows, the results JSON): the grade,
        the error's first line, the agent's timings, video and dataset episode."""
        info = self.agent_info
        return {
            "score": self.score,
            "success": self.success,
            "total_reward": self.total_reward,
            "steps": self.steps,
            "terminated": self.grade.get("terminated"),
            "truncated": self.grade.get("truncated"),
            "cut_by_max_steps": info.get("truncated_by_agent"),
            "duration": round(self.duration, 3),
            "prompt": self.prompt,
            "error": self.error.splitlines()[0] if self.error else None,
            "error_type": self.error_type,
            "phase": self.phase,
            "infer_s": info.get("infer_s"),
            "env_s": info.get("env_s"),
            "policy_busy": info.get("policy_busy"),
            "timing": info.get("timing"),
            "stopped": info.get("stopped"),
            "grade_source": self.grade.get("grade_source"),
            "notes": self.grade.get("notes"),
            "video": info.get("video"),
            "dataset": info.get("dataset"),
        }

    def to_dict(self) -> dict[str, Any]:
        """Everything, for a full record (``asdict`` plus the task's row, key and slug)."""
        out = asdict(self)
        out["task"] = self.task.to_row()
        out["key"] = self.task.key
        out["slug"] = self.task.slug
        return out


async def rollout(
    task: Task,
    agent: Agent,
    provider: Provider,
    *,
    index: int = 0,
    timeout: float | None = None,
    connect_timeout: float = 30.0,
) -> RolloutResult:
    """Run ``task`` once; never raises for rollout failures (see ``RolloutResult.error``)."""
    result = RolloutResult(task, index)
    phase: Phase = "place"
    start = time.monotonic()
    try:
        async with asyncio.timeout(timeout):
            async with provider(task) as runtime:
                phase = "start"
                # a Shared substrate's connection may be kept for the next rollout
                pool = current_pool() if isinstance(provider, Shared) else None
                if pool is not None:
                    control = await pool.acquire(runtime, timeout=connect_timeout)
                else:
                    control = await ControlClient.connect(runtime, timeout=connect_timeout)
                graded = False
                try:
                    run = await control.start(task)
                    result.prompt = run.prompt
                    phase = "agent"
                    try:
                        info = await agent(run)
                    except BaseException:
                        with contextlib.suppress(Exception):
                            await asyncio.shield(control.cancel(run))
                        raise
                    result.agent_info = (
                        info.to_dict() if isinstance(info, EpisodeReport) else dict(info or {})
                    )
                    phase = "grade"
                    grade = await control.result(run)
                    graded = True
                finally:
                    if graded and pool is not None:
                        await pool.release(runtime, control)
                    else:
                        await control.close()
        _apply_grade(result, grade)
    except TimeoutError as exc:
        if timeout is not None and time.monotonic() - start >= timeout * 0.999:
            result.error = f"rollout timed out after {timeout} s (during {phase})"
        else:
            result.error = f"{exc}\n{format_exc()}"
        result.error_type, result.phase = "TimeoutError", phase
    except TemplateError as exc:  # the user's lines, not the control channel's
        result.error = str(exc)
        result.error_type, result.phase = exc.type_name, phase
    except Exception as exc:
        result.error = f"{exc}\n{format_exc()}"
        result.error_type, result.phase = type(exc).__name__, phase
    result.duration = time.monotonic() - start
    return result


def _apply_grade(result: RolloutResult, grade: dict[str, Any]) -> None:
    result.grade = dict(grade)
    score = grade.get("score")
    result.score = float(score) if score is not None else None
    success = grade.get("success")
    result.success = (
        bool(success) if success is not None else bool(result.score and result.score > 0)
    )
    reward = grade.get("total_reward")
    result.total_reward = float(reward) if reward is not None else None
    steps = grade.get("steps", result.agent_info.get("steps"))
    result.steps = int(steps) if steps is not None else None
