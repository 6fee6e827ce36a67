"""An agent split for serving: its model, built once per device in the session's model server
(:mod:`.model_server`), and its shell, the rest of it (adapter, chunk size, ensembler, history
length, observers), which each worker rebuilds around a :class:`ServedModel` that reaches the
server over the openpi wire. The worker's episodes run exactly as the whole agent's would;
only the forward happens elsewhere, batched with every other worker's.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_hud.errors import HudError, RemoteModelError
from pytest_hud.robot.agent.agent import RobotAgent
from pytest_hud.robot.agent.batching import BatchedAgent, BatchedModel
from pytest_hud.robot.agent.model import Model
from pytest_hud.robot.agent.remote import RemoteModel

__all__ = ["ModelFacts", "NotServable", "ServedModel", "rebuild", "split"]


class NotServable(HudError, ValueError):
    """An agent whose model cannot be served apart from it (the session then places a copy
    in each worker, and says why)."""


@dataclass(frozen=True)
class ModelFacts:
    """What an agent reads of its model besides its forward."""

    n_obs_steps: int = 1
    n_action_steps: int | None = None
    ensembler: Any = None

    @classmethod
    def of(cls, model: Model) -> ModelFacts:
        steps = getattr(model, "n_action_steps", None)
        return cls(
            n_obs_steps=max(1, int(getattr(model, "n_obs_steps", 1) or 1)),
            n_action_steps=int(steps) if steps else None,
            ensembler=getattr(model, "ensembler", None),
        )


class _Shell(Model):
    """The model's place in a shell on its way to a worker: only its facts."""

    def __init__(self, facts: ModelFacts) -> None:
        self.facts = facts

    def infer(self, batch: dict[str, Any]) -> np.ndarray:
        raise NotServable("an agent's shell has no model; rebuild() puts a ServedModel in")


def split(agent: object) -> tuple[Model, bytes]:
    """``(model, shell)``: the model to serve and the pickled rest of ``agent``; NotServable
    saying why when the model cannot be served apart (a plain callable, a model that binds
    to each env's spaces, one that is already remote, a shell that does not pickle)."""
    if isinstance(agent, BatchedAgent):
        agent = agent.agent  # the copy it wraps, whose model is its BatchedModel
    if not isinstance(agent, RobotAgent):
        raise NotServable(
            f"the agent is a {type(agent).__name__}, not a RobotAgent: there is no model to "
            "serve apart from it"
        )
    model = agent.model
    if isinstance(model, BatchedModel):
        model = model.model
    if not model.batchable:
        raise NotServable(f"its model ({type(model).__name__}) is already remote")
    if type(model).bind is not Model.bind:
        raise NotServable(
            f"its model ({type(model).__name__}) binds to each env's spaces (Model.bind), "
            "which the openpi wire does not carry"
        )
    shell = copy.copy(agent)
    shell.model = _Shell(ModelFacts.of(model))
    try:
        data = pickle.dumps(shell)
    except Exception as exc:
        raise NotServable(
            f"the rest of the agent (adapter, observers) cannot be sent to the workers: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    return model, data


def rebuild(shell: bytes, model: Callable[[ModelFacts], Model]) -> RobotAgent:
    """The agent ``shell`` is the rest of, around ``model(facts)``."""
    agent = pickle.loads(shell)  # our own model server's, from the session's private folder
    if not isinstance(agent, RobotAgent) or not isinstance(agent.model, _Shell):
        raise NotServable(f"expected an agent's shell, got {type(agent).__name__}")
    agent.model = model(agent.model.facts)
    return agent


class ServedModel(RemoteModel):
    """A model served by the session's model server: a :class:`RemoteModel` with the served
    model's facts (history length, chunk, ensembler), counting its requests. A server that
    went away is not waited for (``reconnect=0``: nobody restarts it); ``await why()`` (when
    given) says what became of it (None: nothing, it serves), and that goes into the error."""

    def __init__(
        self,
        url: str,
        facts: ModelFacts,
        *,
        api_key: str | None = None,
        why: Callable[[], Awaitable[str | None]] | None = None,
    ) -> None:
        super().__init__(url, api_key=api_key, reconnect=0)
        self.n_obs_steps = facts.n_obs_steps
        self.n_action_steps = facts.n_action_steps
        self.ensembler = facts.ensembler
        self.why = why
        #: requests sent so far (answered or not)
        self.requests = 0

    async def ainfer(self, row: dict[str, Any]) -> np.ndarray:
        self.requests += 1
        try:
            return await super().ainfer(row)
        except RemoteModelError as exc:
            reason = await self.why() if self.why is not None else None
            if reason is None:
                raise
            raise RemoteModelError(f"{reason}\n(the request: {exc})") from None
