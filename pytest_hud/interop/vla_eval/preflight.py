"""Before any item: a vla-eval server's HELLO against the envs this process sees; misfits are one
usage error naming both sides. Lives apart because it sees both sides.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from pytest_hud.errors import AgentSpecError, HudError
from pytest_hud.interop.vla_eval.agent import VlaEvalAgent, VlaEvalModel, env_specs
from pytest_hud.interop.vla_eval.connection import VlaEvalError, normalize_url
from pytest_hud.interop.vla_eval.specs import check_specs
from pytest_hud.robot.agent.registry import AgentKind
from pytest_hud.robot.contract import Contract
from pytest_hud.runtime.contracts import declared_contracts, run_apart

__all__ = ["KIND", "VlaEvalConventionWarning", "declared_contracts", "load", "preflight"]


class VlaEvalConventionWarning(HudError, UserWarning):
    """The server and the env declare different conventions (rotation, gripper, ...)."""


def _url(arg: str | None) -> str:
    try:
        return normalize_url(arg or "")
    except ValueError as exc:
        raise AgentSpecError(
            f"vla-eval: {exc}, e.g. --hud-agent=vla-eval:ws://127.0.0.1:8000"
        ) from None


def check(url: str, info: Mapping[str, object], contracts: list[tuple[str, Contract]]) -> None:
    """Raise AgentSpecError for an env the server cannot serve; warn on conventions."""
    server = f"{info.get('model_server', '?')} at {url}"
    errors: list[str] = []
    for label, contract in contracts:
        spaces = contract.spaces()
        found = check_specs(info, spaces, env_specs(spaces))
        errors += [f"env {label!r}: {e}" for e in found.errors]
        if found.warnings:
            warnings.warn(found.warning_table(server), VlaEvalConventionWarning, stacklevel=2)
    if errors:
        raise AgentSpecError(
            f"the vla-eval model server {server} does not fit:\n  " + "\n  ".join(errors)
        )


def _hello(url: str) -> dict[str, object]:
    try:
        return run_apart(VlaEvalModel(url, retries=0).probe())
    except VlaEvalError as exc:
        raise AgentSpecError(str(exc)) from None


def preflight(arg: str | None) -> None:
    """The registry's check for ``vla-eval:URL`` (the xdist controller's, before workers)."""
    url = _url(arg)
    check(url, _hello(url), declared_contracts())


def load(arg: str | None) -> VlaEvalAgent:
    """``--hud-agent=vla-eval:URL``: the agent, once the server answered and fits."""
    url = _url(arg)
    info = _hello(url)
    check(url, info, declared_contracts())
    agent = VlaEvalAgent(url)
    agent.model.server_info = info
    return agent


#: ``--hud-agent=vla-eval:URL``, registered under the ``pytest_hud.agents`` entry points.
KIND = AgentKind(
    load=load, form="vla-eval:ws://HOST:PORT", preflight=preflight, checked_in_controller=True
)
