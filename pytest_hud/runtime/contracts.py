"""The contracts of the robot envs this process declares, for checks before any item, taken from a
running endpoint where possible, else from a probe sim.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
from collections.abc import Coroutine
from typing import TypeVar

from pytest_hud.robot.contract import Contract
from pytest_hud.robot.sim.endpoint import RobotEndpoint
from pytest_hud.runtime.modules import declared_environments

__all__ = ["contract_of", "declared_contracts", "declared_robots", "run_apart"]

T = TypeVar("T")


def run_apart(coro: Coroutine[object, object, T], timeout: float = 120.0) -> T:
    """Run ``coro`` on a fresh loop in a thread (the caller may itself be in a loop)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result(timeout)


async def _spawned_contract(endpoint: RobotEndpoint) -> Contract:
    probe = copy.copy(endpoint)  # a sim of its own, so the env's endpoint stays unstarted
    probe._child = probe._rpc = probe._info = probe._start_lock = None
    try:
        await probe.start()
        return probe.contract
    finally:
        await probe.stop()


def contract_of(copies: list[RobotEndpoint]) -> Contract:
    """One declaration's contract (``copies``: its endpoint in each import of the module):
    from a started copy, derived here (``local_contract()``), else from a probe sim."""
    for endpoint in copies:
        if endpoint.started:
            return endpoint.contract
    for endpoint in copies:
        local = getattr(endpoint, "local_contract", None)
        if callable(local):
            found: Contract = local()
            return found
    return run_apart(_spawned_contract(copies[0]))


def declared_robots() -> dict[str, list[RobotEndpoint]]:
    """Label -> the robot endpoints declared under it (``env`` for an env's ``robot``
    capability, ``env.name`` for another; a module imported twice gives two copies)."""
    found: dict[str, list[RobotEndpoint]] = {}
    for env, _ in declared_environments():
        for name, cap in env.capabilities.items():
            if isinstance(cap, RobotEndpoint):
                label = env.name if name == "robot" else f"{env.name}.{name}"
                found.setdefault(label, []).append(cap)
    return found


def declared_contracts() -> list[tuple[str, Contract]]:
    """(label, contract) of every robot capability the imported env modules declare
    (a module imported twice, as a LocalRuntime does, counts once)."""
    return [(label, contract_of(copies)) for label, copies in declared_robots().items()]
