"""PolicyReplicas: N PolicyServer replicas as Ray actors, many sim actors feeding few policies.

Named replicas are found by other drivers (:func:`replica_urls`); agents follow a restarted
replica to its new address. Agent-side: joins Ray only through :mod:`pytest_hud.plumbing.cluster`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pytest_hud.errors import AgentSpecError, RemoteModelError
from pytest_hud.plumbing.cluster import connect
from pytest_hud.robot.agent.agent import RobotAgent, RunSettings
from pytest_hud.robot.episode import EpisodeReport, EpisodeRun

__all__ = [
    "NAMESPACE",
    "RECONNECT",
    "PolicyActor",
    "PolicyReplicas",
    "ReplicaAgent",
    "replica_agent",
    "replica_urls",
]

#: The Ray namespace of named replicas (any driver can look them up there).
NAMESPACE = "pytest_hud"
#: Seconds an agent waits for a restarted replica (Ray's restart plus the model's build).
RECONNECT = 120.0


class PolicyActor:
    """An async Ray actor holding one PolicyServer of ``factory()``'s model (built in
    :meth:`start`; a restarted actor, which Ray builds again with the same arguments,
    starts it at the first :meth:`address`)."""

    def __init__(
        self,
        factory: Callable[[], Any] | None = None,
        server_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.factory = factory
        self.server_kwargs = dict(server_kwargs or {})
        self.server: Any = None
        self.url = ""
        self._starting: asyncio.Lock | None = None

    async def start(
        self,
        factory: Callable[[], Any] | None = None,
        server_kwargs: dict[str, object] | None = None,
    ) -> str:
        """Serve (once; later calls return the url)."""
        import ray

        from pytest_hud.robot.agent.policy_server import PolicyServer

        if factory is not None:
            self.factory, self.server_kwargs = factory, dict(server_kwargs or {})
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self.server is None:
                if self.factory is None:
                    raise RemoteModelError("a PolicyActor needs a model factory to serve")
                host = str(ray.util.get_node_ip_address())
                server = PolicyServer(self.factory(), host=host, port=0, **self.server_kwargs)
                self.url = str(await server.start())
                self.server = server
        return self.url

    async def address(self) -> str:
        """The ``ws://`` url this replica serves (for drivers that found it by name, and
        agents following a restarted replica: its server starts here)."""
        if self.server is None and self.factory is not None:
            return await self.start()
        return self.url

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
        runtime_env: Mapping[str, object] | None = None,
        address: str | None = None,
        max_wait_s: float = 0.005,
        batch_size: int | None = None,
        boot_timeout: float = 300.0,
        name: str | None = None,
        restarts: int = 0,
    ) -> None:
        if not isinstance(replicas, int) or replicas < 1:
            raise ValueError(f"replicas must be a positive int, got {replicas!r}")
        self.factory = factory
        self.replicas = replicas
        self.options: dict[str, object] = {"num_cpus": num_cpus, "max_restarts": restarts}
        if num_gpus is not None:
            self.options["num_gpus"] = num_gpus
        if resources:
            self.options["resources"] = dict(resources)
        if runtime_env is not None:
            self.options["runtime_env"] = dict(runtime_env)
        self.address = address
        self.name = name
        self.server_kwargs = {"max_wait_s": max_wait_s, "batch_size": batch_size}
        self.boot_timeout = boot_timeout
        self.handles: list[Any] = []
        self.urls: list[str] = []

    async def __aenter__(self) -> PolicyReplicas:
        import ray

        await asyncio.to_thread(connect, self.address)
        actor = ray.remote(PolicyActor)
        named = [
            {"name": f"{self.name}/{i}", "namespace": NAMESPACE} if self.name else {}
            for i in range(self.replicas)
        ]
        self.handles = [
            actor.options(**self.options, **n).remote(self.factory, self.server_kwargs)
            for n in named
        ]
        try:
            async with asyncio.timeout(self.boot_timeout):
                self.urls = list(await asyncio.gather(*(h.start.remote() for h in self.handles)))
        except BaseException as exc:
            await self._stop()
            if isinstance(exc, TimeoutError):
                raise RemoteModelError(
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

    def agent(self, adapter: object = None, *, reconnect: float = RECONNECT) -> ReplicaAgent:
        """An agent sending each rollout to the next replica (see :class:`ReplicaAgent`),
        following a restarted replica to its new address for up to ``reconnect`` s."""
        if not self.urls:
            raise RuntimeError("enter the replicas first: `async with PolicyReplicas(...)`")
        resolvers = [_resolver(h) for h in self.handles]
        return ReplicaAgent(self.urls, adapter, resolvers=resolvers, reconnect=reconnect)


def _resolver(handle: Any) -> Callable[[], Awaitable[str | None]]:
    """Where the replica behind ``handle`` serves now (Ray keeps a restarted actor's handle)."""

    async def resolve() -> str | None:
        return str(await handle.address.remote()) or None

    return resolve


class ReplicaAgent(RobotAgent):
    """A RobotAgent over several policy servers: each rollout goes to the next one in
    turn (one ``RobotAgent(RemoteModel(url))`` per url). A RobotAgent itself, so the
    plugin's per-rollout settings (max steps, video, recording) reach every episode.
    ``resolvers`` (one per url) say where each server serves now: a replica that comes
    back elsewhere is followed (see the module doc)."""

    def __init__(
        self,
        urls: list[str],
        adapter: Any = None,
        name: str = "replicas",
        *,
        resolvers: list[Callable[[], Awaitable[str | None]]] | None = None,
        reconnect: float = RECONNECT,
    ) -> None:
        from pytest_hud.robot.agent.remote import RemoteModel

        if not urls:
            raise ValueError("ReplicaAgent needs at least one policy server url")
        if resolvers is not None and len(resolvers) != len(urls):
            raise ValueError(f"{len(resolvers)} resolvers for {len(urls)} policy server urls")
        where: list[Callable[[], Awaitable[str | None]] | None] = (
            list(resolvers) if resolvers is not None else [None] * len(urls)
        )
        self.agents = [
            RobotAgent(
                RemoteModel(url, resolve=where[i], reconnect=reconnect),
                adapter,
                name=f"{name}[{i}]",
            )
            for i, url in enumerate(urls)
        ]
        super().__init__(self.agents[0].model, adapter, name=name)
        self.turn = 0

    async def __call__(self, run: EpisodeRun, settings: RunSettings | None = None) -> EpisodeReport:
        agent, self.turn = self.agents[self.turn % len(self.agents)], self.turn + 1
        return await agent(run, settings)


def replica_agent(
    name: str, address: str | None = None, *, agent_name: str | None = None
) -> ReplicaAgent:
    """A :class:`ReplicaAgent` over the replicas named ``name`` (:func:`replica_urls`),
    following each to a new address when Ray restarts it. AgentSpecError when no cluster is
    named and none is joined."""
    import ray

    if address is None and not os.environ.get("RAY_ADDRESS") and not ray.is_initialized():
        raise AgentSpecError(
            "looks replicas up on a running Ray cluster; expected its address "
            "(--hud-runtime=ray:HOST:PORT or ray://HOST:PORT) or $RAY_ADDRESS, got neither"
        )
    urls = replica_urls(name, address)
    handles = [ray.get_actor(f"{name}/{i}", namespace=NAMESPACE) for i in range(len(urls))]
    resolvers = [_resolver(h) for h in handles]
    return ReplicaAgent(urls, name=agent_name or f"openpi:ray:{name}", resolvers=resolvers)


def replica_urls(name: str, address: str | None = None) -> list[str]:
    """The urls of the replicas started with ``PolicyReplicas(..., name=name)`` on the
    cluster (``address``, else $RAY_ADDRESS), in replica order."""
    import ray
    from ray.util import list_named_actors

    connect(address)
    found = [a for a in list_named_actors(all_namespaces=True) if a["namespace"] == NAMESPACE]
    ours = sorted(
        (a["name"] for a in found if a["name"].rpartition("/")[0] == name),
        key=lambda n: int(n.rpartition("/")[2]),
    )
    if not ours:
        names = sorted({a["name"].rpartition("/")[0] for a in found})
        raise AgentSpecError(
            f"no policy replicas named {name!r} on the Ray cluster; expected actors "
            f"{name}/0.. in namespace {NAMESPACE!r} (PolicyReplicas(..., name={name!r})), "
            f"got {names or 'none'}; fix: start them, or name one of those"
        )
    handles = [ray.get_actor(n, namespace=NAMESPACE) for n in ours]
    answers: list[object] = ray.get([h.address.remote() for h in handles], timeout=60)
    urls = [str(u) for u in answers]
    missing = [n for n, u in zip(ours, urls, strict=True) if not u]
    if missing:
        raise AgentSpecError(f"policy replicas {missing} are not serving yet; retry")
    return urls
