"""An agent split for serving (issue 54): its model served once, its shell (adapter, chunk,
ensembler, history) rebuilt in each worker around a ServedModel. Real rollouts over the
openpi/0 wire against a real PolicyServer and a real env server, in this process.
"""

from __future__ import annotations

import asyncio
import pickle
import time
from typing import Any

import numpy as np
import pytest
from policy_models import StateModel
from policy_wire import env_server
from procs import COUNTER

from pytest_hud import Runtime, Task, run
from pytest_hud.errors import RemoteModelError
from pytest_hud.robot import Ensembler, RobotAgent
from pytest_hud.robot.agent.adapter import Adapter
from pytest_hud.robot.agent.model import ZeroModel
from pytest_hud.robot.agent.model_server import Metered
from pytest_hud.robot.agent.policy_server import PolicyServer
from pytest_hud.robot.agent.remote import RemoteModel
from pytest_hud.robot.agent.shell import ModelFacts, NotServable, ServedModel, rebuild, split

pytestmark = pytest.mark.anyio
TASKS = [Task("counter", "count", {"seed": s}) for s in range(4)]


class Scaled(Adapter):
    """An adapter with state of its own: what a shell must carry to the worker."""

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def action(self, chunk: np.ndarray) -> np.ndarray:
        return chunk * self.factor


def whole() -> RobotAgent:
    return RobotAgent(
        StateModel(action_size=2, chunk=4),
        Scaled(0.5),
        ensembler=Ensembler("newest", query_every=2),
        chunk_size=3,
        name="whole",
    )


async def test_the_rebuilt_agent_runs_the_episodes_the_whole_agent_runs() -> None:
    model, shell = split(whole())
    meter = Metered(model)
    async with env_server(COUNTER) as envs, PolicyServer(meter, token="k") as server:
        served: list[ServedModel] = []

        def remote(facts: ModelFacts) -> ServedModel:
            served.append(ServedModel(server.url, facts, api_key="k"))
            return served[-1]

        agent = rebuild(shell, remote)
        assert agent.name == "whole" and agent.chunk_size == 3
        assert isinstance(agent.adapter, Scaled) and agent.adapter.factor == 0.5
        assert agent.ensembler is not None and agent.ensembler.mode == "newest"
        results = await run(TASKS, agent, Runtime(envs.url))
        local = await run(TASKS, whole(), Runtime(envs.url))
    assert [r.error for r in results] == [None] * 4
    assert [r.grade for r in results] == [r.grade for r in local]
    assert [r.steps for r in results] == [r.steps for r in local]
    assert served[0].requests == sum(r.agent_info["inferences"] for r in results) > 0
    figures = meter.figures()
    assert figures["requests"] == served[0].requests
    assert 0 < float(figures["busy_share"] or 0) <= 1  # type: ignore[arg-type]


class NotPicklable(Adapter):
    def __init__(self) -> None:
        self.hook = lambda x: x


async def plain_agent(run: object) -> dict[str, Any]:
    return {}


@pytest.mark.parametrize(
    ("agent", "why"),
    [
        (plain_agent, "not a RobotAgent: there is no model to serve"),
        (RobotAgent(ZeroModel()), "binds to each env's spaces"),
        (RobotAgent(RemoteModel("ws://127.0.0.1:1")), "is already remote"),
        (RobotAgent(StateModel(), NotPicklable()), "cannot be sent to the workers"),
    ],
    ids=["callable", "binds", "remote", "unpicklable"],
)
def test_what_cannot_be_served_apart_says_why(agent: object, why: str) -> None:
    with pytest.raises(NotServable, match=why):
        split(agent)


def test_a_shell_holds_no_model() -> None:
    _, shell = split(whole())
    kept = pickle.loads(shell)
    assert kept.model.facts == ModelFacts(n_obs_steps=1, n_action_steps=None)
    with pytest.raises(NotServable, match="has no model"):
        kept.model.infer({})


async def test_a_served_model_whose_server_is_gone_says_what_became_of_it() -> None:
    async def gone() -> str:
        return "the model server ... was killed by signal SIGKILL (9); fix: read its output"

    async def running() -> None:
        return None

    async def ask(model: ServedModel) -> None:
        await model.ainfer({"observation/state": np.zeros(2, np.float32)})

    dead = ServedModel("ws://127.0.0.1:1", ModelFacts(), why=gone)
    with pytest.raises(RemoteModelError, match="was killed by signal SIGKILL") as caught:
        await asyncio.create_task(ask(dead))
    assert "cannot connect to the policy server" in str(caught.value)  # the request's own
    alive = ServedModel("ws://127.0.0.1:1", ModelFacts(), why=running)
    with pytest.raises(RemoteModelError, match="^cannot connect to the policy server"):
        await asyncio.create_task(ask(alive))


def test_metered_forwards_and_their_share_of_the_span() -> None:
    class Nap(StateModel):
        def infer(self, batch: dict[str, Any]) -> np.ndarray:
            time.sleep(0.02)
            return super().infer(batch)

    seen: list[float] = []
    meter = Metered(Nap(), seen.append)
    assert meter.figures()["forwards"] == 0 and meter.figures()["busy_share"] is None
    for n in (3, 3, 1):
        meter.infer({"observation/state": np.zeros((n, 2), np.float32)})
    figures = meter.figures()
    assert figures["widths"] == {"1": 1, "3": 2} and figures["requests"] == 7
    assert figures["mean_width"] == pytest.approx(7 / 3, abs=1e-3)
    assert len(seen) == 3 and all(s >= 0.02 for s in seen)
    assert float(figures["forward_ms"]) >= 20  # type: ignore[arg-type]
    assert 0 < float(figures["busy_share"]) <= 1  # type: ignore[arg-type]
