"""``env.vla_eval(Benchmark, **params)``: a vla-eval benchmark as an env module's robot. The class
must be importable in a sim process (not defined in ``__main__``) when it is served in one.
"""

from __future__ import annotations

from typing import Any

from pytest_hud.interop.vla_eval.bridge import VlaEvalBridge, benchmark_rows
from pytest_hud.robot.contract import Contract
from pytest_hud.robot.sim.endpoint import RobotEndpoint, serve_inline

__all__ = ["VlaEvalEndpoint", "benchmark_rows", "serve_benchmark"]

_OPTIONS = ("num_envs", "max_steps", "fps", "action_dim")


class VlaEvalEndpoint(RobotEndpoint):
    """The endpoint of a served benchmark; it can also derive its contract here."""

    def __init__(self, kwargs: dict[str, Any], start_timeout: float, inline: bool = False) -> None:
        super().__init__(VlaEvalBridge, kwargs=kwargs, start_timeout=start_timeout, inline=inline)
        self.bridge_kwargs = kwargs

    def local_contract(self) -> Contract:
        """The contract the sim will publish, derived in this process (one benchmark
        instance, as :func:`benchmark_rows` builds): a preflight without a sim process."""
        bridge = VlaEvalBridge(**self.bridge_kwargs)
        try:
            return bridge.ensure_contract()
        finally:
            bridge.close()


def serve_benchmark(
    benchmark: object, *, start_timeout: float = 300.0, inline: bool | None = None, **params: object
) -> VlaEvalEndpoint:
    """The endpoint serving ``benchmark``: a class (built in the sim with ``params``) or an
    instance. Bridge options: ``num_envs`` (benchmark instances, one per concurrent
    rollout), ``max_steps`` (default: the benchmark's metadata, else 300), ``fps``,
    ``action_dim`` (when the action spec does not give every component's dims); every
    other keyword goes to the benchmark's constructor. ``inline``: by default the benchmark runs
    in the env server's process, as vla-eval's own orchestrator holds it, unless the session
    asks for sim processes (``--hud-sim-process``); ``False``: a sim process of its own
    (see ``Environment.gym``)."""
    kwargs: dict[str, object] = {k: params.pop(k) for k in _OPTIONS if k in params}
    kwargs.update(target=benchmark, params=params)
    return VlaEvalEndpoint(kwargs, start_timeout, serve_inline(inline))
