"""A vla-eval model server as the agent: ``--hud-agent=vla-eval:ws://HOST:PORT``. One connection
per rollout in flight, so a batching server sees concurrent rollouts together; a connection
whose episode ended in step with the server is kept for the next rollout, as a vla-eval shard
keeps its one.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Mapping
from typing import Any, Unpack, cast

import numpy as np

from pytest_hud.errors import AdapterError
from pytest_hud.interop.vla_eval.connection import (
    SessionOptions,
    VlaEvalError,
    VlaEvalSession,
    normalize_url,
)
from pytest_hud.interop.vla_eval.specs import SPECS_KEY, camera_names, check_specs, spec_map
from pytest_hud.robot.agent.adapter import Adapter
from pytest_hud.robot.agent.agent import EpisodeArgs, EpisodeReport, RobotAgent
from pytest_hud.robot.agent.model import Batch, Model, Row, episode_task
from pytest_hud.robot.contract import Spaces

__all__ = ["VlaEvalAdapter", "VlaEvalAgent", "VlaEvalError", "VlaEvalModel", "task_info"]

log = logging.getLogger("pytest_hud.vla_eval")


class VlaEvalModel(Model):
    """Infer through the vla-eval model server at ``url``, one connection per task, kept
    between its episodes."""

    batchable = False  # one request per connection: batching happens in the server

    def __init__(self, url: str, **options: Unpack[SessionOptions]) -> None:
        self.url = normalize_url(url)
        self.options = options
        self.server_info: dict[str, object] = {}
        self._sessions: weakref.WeakKeyDictionary[asyncio.Task[object], VlaEvalSession] = (
            weakref.WeakKeyDictionary()
        )
        #: connections whose episode ended in step with the server, for the next episodes
        #: on the same loop (a connection serves only the loop it was opened on): never
        #: more than the episodes that were once in flight together
        self._idle: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[VlaEvalSession]] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return f"<VlaEvalModel {self.url}>"

    def _open_session(self) -> VlaEvalSession | None:
        """The calling task's connection if it is already open."""
        task = episode_task()
        return self._sessions.get(task) if task is not None else None

    async def session(self) -> VlaEvalSession:
        """The calling task's connection: a kept one, else opened (HELLO exchanged)."""
        found = self._open_session()
        if found is not None:
            return found
        task = episode_task()
        if task is None:
            raise VlaEvalError("VlaEvalModel must be used from an asyncio task")
        kept = self._idle.get(asyncio.get_running_loop())
        if kept:
            session = kept.pop()
        else:
            session = VlaEvalSession(self.url, **self.options)
            self.server_info = await session.open()
        self._sessions[task] = session
        task.add_done_callback(self._task_done)
        return session

    def _task_done(self, task: asyncio.Task[object]) -> None:
        session = self._sessions.pop(task, None)
        if session is not None:
            session._drop()

    async def close_session(self) -> None:
        """The calling task's episode is over: its connection is kept for the next episode
        if it is in step with the server (no reply outstanding), else closed."""
        task = episode_task()
        session = self._sessions.pop(task, None) if task is not None else None
        if session is None:
            return
        if session.reusable:
            self._idle.setdefault(asyncio.get_running_loop(), []).append(session)
        else:
            await session.close()

    async def aclose(self) -> None:
        """Close every connection of the running loop, kept or in use (the end of a
        session, or of a preflight's loop); the model stays usable."""
        loop = asyncio.get_running_loop()
        sessions = self._idle.pop(loop, [])
        for task in [t for t in self._sessions if t.get_loop() is loop]:
            sessions.append(self._sessions.pop(task))
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)

    async def probe(self) -> dict[str, object]:
        """Connect, exchange HELLO and hang up: the server's HELLO payload."""
        session = VlaEvalSession(self.url, **self.options)
        try:
            self.server_info = await session.open()
        finally:
            await session.close()
        return self.server_info

    def infer(self, batch: Batch) -> np.ndarray:
        raise NotImplementedError(
            "VlaEvalModel is per-row (one observation per message): use it in a RobotAgent "
            "(VlaEvalAgent); the vla-eval server batches across connections"
        )

    async def ainfer(self, row: Row) -> np.ndarray:
        session = self._open_session() or await self.session()  # no coroutine once open
        actions = np.asarray(await session.act(row), dtype=np.float32)  # decoded once, no copy
        if actions.ndim == 1:
            actions = actions[None]
        if actions.ndim != 2 or actions.shape[0] < 1:
            raise VlaEvalError(
                f"the vla-eval server at {self.url} returned actions of shape "
                f"{actions.shape}; expected [A] or a chunk [T, A]"
            )
        return actions


class VlaEvalAdapter(Adapter):
    """The env's observation as vla-eval's ``{images, states, task_description}``.

    Binding checks the server's HELLO specs against the env's contract: a missing
    camera or state, or an action of another size, raises AdapterError naming both
    sides; convention differences are logged once as a table."""

    def __init__(self, server_info: Mapping[str, object] | None = None) -> None:
        self.server_info: dict[str, object] = dict(server_info or {})
        self._cams: dict[str, str] = {}
        self._states: list[str] = []

    def _wire(self, spaces: Spaces) -> None:
        server = str(self.server_info.get("model_server", "?"))
        found = check_specs(self.server_info, spaces, env_specs(spaces))
        if found.errors:
            raise AdapterError(
                f"vla-eval model server {server} does not fit this env:\n  "
                + "\n  ".join(found.errors)
            )
        if found.warnings:
            _warn_once(found.warning_table(server))
        self._cams = camera_names(spec_map(self.server_info.get("observation_spec")), spaces)
        self._states = [f.name for f in spaces.robot_states]

    def observation(self, data: Mapping[str, object], prompt: str) -> Row:
        row: dict[str, object] = {
            "images": {key: np.asarray(data[c]) for c, key in self._cams.items()}
        }
        if self._states:
            parts = [np.asarray(data[k], np.float32).reshape(-1) for k in self._states]
            row["states"] = np.concatenate(parts) if len(parts) > 1 else parts[0]
        row["task_description"] = prompt
        return row


_warned: set[str] = set()


def _warn_once(table: str) -> None:
    if table not in _warned:
        _warned.add(table)
        log.warning("%s", table)


def env_specs(spaces: Spaces) -> object:
    """The benchmark's own specs, where the env published them (``env.vla_eval`` puts
    them on the action feature, under ``vla_eval``)."""
    return spaces.action_feature.extra.get(SPECS_KEY)


def task_info(run: object, prompt: str) -> dict[str, object]:
    """The ``episode_start`` task: the row's id, env, args (scalars) and prompt."""
    task = getattr(run, "task", None)
    info: dict[str, object] = {"task_description": prompt}
    if task is not None:
        info.update(name=task.key, env=task.env, template=task.id)
        for key, value in task.args.items():
            if isinstance(value, str | int | float | bool):
                info[key] = value
            elif isinstance(value, dict):  # a vla-eval task dict (env.vla_eval rows)
                info.update(
                    {k: v for k, v in value.items() if isinstance(v, str | int | float | bool)}
                )
    return info


class VlaEvalAgent(RobotAgent):
    """RobotAgent over a vla-eval model server (see the module's docstring)."""

    model: VlaEvalModel

    def __init__(self, url: str, *, name: str | None = None, **kwargs: Any) -> None:
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in SessionOptions.__annotations__}
        model = VlaEvalModel(url, **cast(SessionOptions, options))
        super().__init__(model, VlaEvalAdapter(), name=name or f"vla-eval:{model.url}", **kwargs)

    async def run_episode(
        self, capability: str | dict[str, object], **episode: Unpack[EpisodeArgs]
    ) -> EpisodeReport:
        session = await self.model.session()
        assert isinstance(self.adapter, VlaEvalAdapter)
        self.adapter.server_info = session.server_info
        await session.start_episode(task_info(episode.get("run"), episode.get("prompt", "")))
        start = time.monotonic()
        report: EpisodeReport | None = None
        try:
            report = await super().run_episode(capability, **episode)
            report.extra["vla_eval_reconnects"] = session.reconnects
            return report
        finally:
            if report is not None:
                metrics = {"total_reward": report.total_reward, "terminated": report.terminated}
                steps = report.steps
            else:
                metrics, steps = {"error": True}, 0
            payload = {"metrics": metrics, "steps": steps, "elapsed_sec": time.monotonic() - start}
            await session.end_episode(payload)
            await self.model.close_session()
