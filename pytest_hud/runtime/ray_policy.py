"""PolicyReplicas: N PolicyServer replicas as Ray actors, many sim actors feeding few policies.

The "many simulators, few policy replicas" pattern: each replica is a Ray actor that
builds its model (``factory()``, so the weights load on the replica's node, once) and
serves it with :class:`~pytest_hud.robot.policy_server.PolicyServer` (openpi/0,
batching requests across connections) on the node's address. ``replicas.agent()``
is an agent that sends each rollout to the next replica in turn, as a ``RobotAgent``
over ``RemoteModel``; so rollouts placed by RayRuntime anywhere in the cluster share
the replicas, each batching the rows it is sent.

    async with PolicyReplicas(build_model, replicas=2, num_gpus=1) as replicas:
        results = await run(rows, replicas.agent(), runtime=RayRuntime("envs.py"))

Exiting stops the servers and ``ray.kill``\\ s the actors.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable, Mapping
from typing import Any

from pytest_hud.runtime.errors import SubstrateError
from pytest_hud.runtime.ray import connect

__all__ = ["PolicyActor", "PolicyReplicas"]


class PolicyActor:
    """An async Ray actor holding one PolicyServer."""

    def __init__(self) -> None:
        self.server: Any = None

    async def start(self, factory: Callable[[], Any], server_kwargs: dict[str, Any]) -> str:
        import ray

        from pytest_hud.robot.agent.policy_server import PolicyServer

        host = str(ray.util.get_node_ip_address())
        self.server = PolicyServer(factory(), host=host, port=0, **server_kwargs)
        return str(await self.server.start())

    def batches(self) -> list[int]:
        """The width of every forward this replica ran."""
        return list(self.server.batched.batches) if self.server is not None else []

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()


class PolicyReplicas:
    """``replicas`` PolicyServer actors of ``factory()``'s model (see the module docs)."""

    def __init__(
        self,
        factory: Callable[[], Any],
        replicas: int = 1,
        *,
        num_cpus: float = 1,
        num_gpus: float | None = None,
        resources: Mapping[str, float] | None = None,
        runtime_env: Mapping[str, Any] | None = None,
        address: str | None = None,
        max_wait_s: float = 0.005,
        batch_size: int | None = None,
        boot_timeout: float = 300.0,
    ) -> None:
        if not isinstance(replicas, int) or replicas < 1:
            raise ValueError(f"replicas must be a positive int, got {replicas!r}")
        self.factory = factory
        self.replicas = replicas
        self.options: dict[str, Any] = {"num_cpus": num_cpus, "max_restarts": 0}
        if num_gpus is not None:
            self.options["num_gpus"] = num_gpus
        if resources:
            self.options["resources"] = dict(resources)
        if runtime_env is not None:
            self.options["runtime_env"] = dict(runtime_env)
        self.address = address
        self.server_kwargs = {"max_wait_s": max_wait_s, "batch_size": batch_size}
        self.boot_timeout = boot_timeout
        self.handles: list[Any] = []
        self.urls: list[str] = []
        self._next = itertools.count()

    async def __aenter__(self) -> PolicyReplicas:
        import ray

        await asyncio.to_thread(connect, self.address)
        actor = ray.remote(PolicyActor)
        self.handles = [actor.options(**self.options).remote() for _ in range(self.replicas)]
        try:
            async with asyncio.timeout(self.boot_timeout):
                self.urls = list(
                    await asyncio.gather(
                        *(h.start.remote(self.factory, self.server_kwargs) for h in self.handles)
                    )
                )
        except BaseException as exc:
            await self._stop()
            if isinstance(exc, TimeoutError):
                raise SubstrateError(
                    f"{self.replicas} policy replica(s) asking {self.options} were not "
                    f"serving within boot_timeout={self.boot_timeout} s (killed)"
                ) from None
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stop()

    async def _stop(self) -> None:
        import ray

        handles, self.handles = self.handles, []
        with contextlib.suppress(Exception):
            async with asyncio.timeout(15):
                await asyncio.gather(*(h.stop.remote() for h in handles), return_exceptions=True)
        for handle in handles:
            with contextlib.suppress(Exception):
                ray.kill(handle, no_restart=True)

    async def batches(self) -> list[list[int]]:
        """Every replica's forward widths so far."""
        return list(await asyncio.gather(*(h.batches.remote() for h in self.handles)))

    def agent(self, adapter: Any = None) -> Callable[[Any], Any]:
        """An agent sending each rollout to the next replica (one RobotAgent per replica)."""
        from pytest_hud.robot.agent.agent import RobotAgent
        from pytest_hud.robot.agent.remote import RemoteModel

        if not self.urls:
            raise RuntimeError("enter the replicas first: `async with PolicyReplicas(...)`")
        agents = [
            RobotAgent(RemoteModel(url), adapter, name=f"replica{i}")
            for i, url in enumerate(self.urls)
        ]

        async def round_robin(run: Any) -> Any:
            return await agents[next(self._next) % len(agents)](run)

        return round_robin
