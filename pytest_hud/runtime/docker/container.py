"""DockerRuntime: a fresh container running the env server for every acquisition.

Ports are published on 127.0.0.1 only; containers are labelled with their owner so
:func:`reap_containers` can remove a crashed session's leftovers.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_hud.errors import SubstrateError
from pytest_hud.plumbing.auth import auth_env
from pytest_hud.runtime.docker.engine import (
    LABEL,
    LOG_TAIL,
    MODULE_ENV,
    REMOVE_TIMEOUT,
    _blocking,
    _client,
    _force_remove,
    _forwarded_env,
    _sdk,
    _settled,
)
from pytest_hud.runtime.docker.intents import create_container
from pytest_hud.runtime.docker.owners import _reap_once, owner_labels
from pytest_hud.runtime.provider import Runtime
from pytest_hud.runtime.substrate import CONTROL_PORT, PingedSubstrate, serve_argv
from pytest_hud.runtime.task import Task

__all__ = ["GPUS_ENV", "DockerRuntime"]

#: The GPUs every container of the ``--hud-runtime=docker`` forms gets (``--hud-docker-gpus``).
GPUS_ENV = "PYTEST_HUD_DOCKER_GPUS"


# -- the provider ---------------------------------------------------------------------------
class DockerRuntime:
    """A fresh container serving the env module per acquisition (see the module doc).

    ``image``: the default image (a row's ``runtime_config.image`` wins). ``module``:
    the env module inside the image (else the image's ``$PYTEST_HUD_MODULE`` or its
    ``pytest-hud.module`` label). ``sim_ports``: how many robot sim ports (8001..) to
    publish; a module must declare at most that many sims. ``env``: extra container
    environment (a row's ``runtime_config.env`` adds to it). ``forward_env``: give
    containers the host's ``PYTEST_HUD_*`` and render variables too (under ``env`` and the
    row's; off by default, so a Python-built runtime stays as hermetic as written; the
    ``--hud-runtime=docker`` forms turn it on). ``network``: a Docker
    network to attach (a bridge; ports are still published). ``command``: run this
    argv instead of the env server (it must serve the control channel on port 8000).
    A row's ``runtime_config`` ``cpu`` and ``memory`` become container limits, ``gpu``
    (``"all"``, a count, or ``"device=0,1"``, as ``docker run --gpus``) a GPU request.
    ``gpus``: the request of rows that make none (for sims that render on a GPU,
    ``MUJOCO_GL=egl``); the ``--hud-runtime=docker`` forms take it from
    ``$PYTEST_HUD_DOCKER_GPUS`` (``--hud-docker-gpus``). No GPU is requested unless asked.
    """

    #: a container boots in seconds: the plugin boots the next rows' ahead (runtime/warm.py)
    warm_ahead = True

    def __init__(
        self,
        image: str | None = None,
        *,
        module: str | None = None,
        boot_timeout: float = 120.0,
        sim_ports: int = 8,
        env: Mapping[str, str] | None = None,
        client: object = None,
        labels: Mapping[str, str] | None = None,
        network: str | None = None,
        command: Sequence[str] | None = None,
        forward_env: bool = False,
        gpus: str | None = None,
    ) -> None:
        if sim_ports < 0 or sim_ports > 99:
            raise ValueError(f"sim_ports must be between 0 and 99, got {sim_ports!r}")
        if network in ("host", "none"):
            raise ValueError(
                f"DockerRuntime(network={network!r}) is not supported: it publishes the "
                "container's ports on 127.0.0.1; use a bridge network (the default)"
            )
        self.image = image
        self.module = module
        self.boot_timeout = boot_timeout
        self.sim_ports = sim_ports
        self.env = dict(env or {})
        self.labels = dict(labels or {})
        self.network = network
        self.command = list(command) if command is not None else None
        self.forward_env = forward_env
        self.gpus = gpus
        self._forwarded: dict[str, str] | None = None  # read once, at the first container
        self._client = client
        self._lock = threading.Lock()
        self._pull_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"DockerRuntime({self.image!r})"

    def __call__(self, task: Task, /) -> _DockerSubstrate:
        return _DockerSubstrate(self, task)

    def client(self) -> Any:
        """The docker client (made on first use; blocking)."""
        with self._lock:
            if self._client is None:
                self._client = _client()
            return self._client

    def host_env(self) -> dict[str, str]:
        """The host variables forwarded to containers (none unless ``forward_env``)."""
        if not self.forward_env:
            return {}
        with self._lock:
            if self._forwarded is None:
                self._forwarded = _forwarded_env()
            return self._forwarded

    def image_for(self, task: Task) -> str:
        image = (task.runtime_config.image if task.runtime_config else None) or self.image
        if not image:
            raise SubstrateError(
                f"{task.key}: no image to run: set the row's runtime_config.image or "
                "pass DockerRuntime(image)"
            )
        return image

    def _resolve(self, image: str) -> str | None:
        """Make sure ``image`` is on the engine (pulling it if not); the module to serve."""
        docker = _sdk()
        client = self.client()
        try:
            img = client.images.get(image)
        except docker.errors.ImageNotFound:
            with self._pull_lock:
                try:
                    img = client.images.get(image)
                except docker.errors.ImageNotFound:
                    try:
                        img = client.images.pull(image)
                    except docker.errors.DockerException as exc:
                        raise SubstrateError(
                            f"image {image!r} is not on this Docker engine and pulling it "
                            f"failed ({exc}); build it first (pytest_hud.runtime.docker."
                            "build_image, or docker build)"
                        ) from None
        if self.command is not None or self.module:
            return self.module
        config = img.attrs.get("Config") or {}
        for item in config.get("Env") or []:
            key, _, value = item.partition("=")
            if key == MODULE_ENV and value:
                return value
        module = (config.get("Labels") or {}).get(f"{LABEL}.module")
        if module:
            return str(module)
        raise SubstrateError(
            f"image {image!r} names no env module to serve: pass DockerRuntime(module=...), "
            f"or give the image ENV {MODULE_ENV}=... (build_image(module=...)) or a "
            f"'{LABEL}.module' label"
        )

    def create_kwargs(self, task: Task, image: str, module: str | None) -> dict[str, object]:
        sims = [CONTROL_PORT + 1 + i for i in range(self.sim_ports)]
        if self.command is not None:
            argv = list(self.command)
        else:
            argv = serve_argv("python3", str(module), "0.0.0.0", self.sim_ports)
        cfg = task.runtime_config
        row_env = dict(cfg.env if cfg else ())
        env = {"PYTHONUNBUFFERED": "1", **self.host_env(), **self.env, **row_env, **auth_env()}
        labels = {**self.labels, **owner_labels(), f"{LABEL}.task": task.key}
        kwargs: dict[str, object] = {
            "image": image,
            "command": argv,
            "detach": True,
            "init": True,
            "ports": {f"{p}/tcp": ("127.0.0.1", None) for p in [CONTROL_PORT, *sims]},
            "labels": labels,
            "environment": env,
        }
        if self.network:
            kwargs["network"] = self.network
        if cfg is not None:
            if cfg.cpu:
                kwargs["nano_cpus"] = int(cfg.cpu * 1e9)
            if cfg.memory:
                kwargs["mem_limit"] = cfg.memory
        asked = self.gpus or (os.environ.get(GPUS_ENV) if self.forward_env else None)
        gpus = (cfg.gpu if cfg is not None else None) or asked
        if gpus:
            kwargs["device_requests"] = [_gpu_request(str(gpus))]
        return kwargs


def _gpu_request(gpus: str) -> Any:
    """The engine's request for ``gpus``, as ``docker run --gpus`` reads it: ``all``, a
    count, or ``device=0,1``."""
    types = _sdk().types
    if gpus.startswith("device="):
        ids = gpus.removeprefix("device=").split(",")
        return types.DeviceRequest(device_ids=ids, capabilities=[["gpu"]])
    count = int(gpus) if gpus.isdigit() else -1
    return types.DeviceRequest(count=count, capabilities=[["gpu"]])


def _runtime_of(container: Any, task: Task) -> Runtime | None:
    """The Runtime of a started container, once its published ports show (else None)."""
    ports = (container.attrs.get("NetworkSettings") or {}).get("Ports") or {}
    published: dict[int, int] = {}
    for key, bindings in ports.items():
        port, _, proto = key.partition("/")
        for binding in bindings or []:
            if proto == "tcp" and binding.get("HostIp") == "127.0.0.1" and binding.get("HostPort"):
                published[int(port)] = int(binding["HostPort"])
                break
    if CONTROL_PORT not in published:
        return None
    port_map = {str(p): h for p, h in sorted(published.items()) if p != CONTROL_PORT}
    params = {"kind": "docker", "container": container.id, "host": "127.0.0.1"}
    params["port_map"] = port_map
    return Runtime(f"tcp://127.0.0.1:{published[CONTROL_PORT]}", params, task.runtime_config)


def _log_tail(container: Any, lines: int = LOG_TAIL) -> str:
    try:
        text = container.logs(tail=lines).decode(errors="replace").rstrip()
    except Exception as exc:
        return f"(no logs: {exc})"
    return text or "(no output)"


def _exit_of(container: Any) -> str | None:
    """``exited with code 1 (out of memory)`` once the (reloaded) container has stopped."""
    state = container.attrs.get("State") or {}
    if state.get("Status") not in ("exited", "dead", "removing"):
        return None
    extra = f" ({state['Error']})" if state.get("Error") else ""
    extra += " (out of memory)" if state.get("OOMKilled") else ""
    return f"exited with code {state.get('ExitCode')}{extra}"


class _DockerSubstrate(PingedSubstrate):
    kind = "container"

    def __init__(self, provider: DockerRuntime, task: Task) -> None:
        super().__init__(task, provider.boot_timeout)
        self.provider = provider
        self.container: Any = None
        self.image = ""
        self.kwargs: dict[str, object] = {}

    def ident(self) -> str:
        short = self.container.short_id if self.container is not None else "(not created)"
        return f"{short} ({self.image})"

    async def prepare(self) -> None:
        """Find (or pull) the image and the module it serves: not part of the boot's clock."""
        provider, task = self.provider, self.task
        self.image = provider.image_for(task)
        client = await _blocking(provider.client)
        await _blocking(_reap_once, client)
        module = await _blocking(provider._resolve, self.image)
        self.kwargs = provider.create_kwargs(task, self.image, module)

    async def start(self) -> None:
        create = functools.partial(create_container, self.provider.client(), self.kwargs)
        self.container = await _settled(create, undo=_force_remove)
        try:
            await _settled(self.container.start)
        except _sdk().errors.APIError as exc:
            raise SubstrateError(
                f"{self.task.key}: container of {self.image!r} would not start: {exc}"
            ) from None

    async def endpoint(self) -> Runtime | None:
        return _runtime_of(self.container, self.task)  # the probe has just reloaded it

    async def stopped(self) -> str | None:
        await _blocking(self.container.reload)
        return _exit_of(self.container)

    async def output(self) -> str:
        return await _blocking(_log_tail, self.container)

    async def stop(self) -> None:
        container, self.container = self.container, None
        if container is None:
            return
        fut = asyncio.ensure_future(_blocking(_force_remove, container))
        try:
            await asyncio.wait_for(asyncio.shield(fut), REMOVE_TIMEOUT)
        except TimeoutError:
            raise SubstrateError(
                f"{self.task.key}: container {container.short_id} was not removed within "
                f"{REMOVE_TIMEOUT} s (reap_containers() removes it once this process is gone)"
            ) from None

    async def death(self) -> str | None:
        """How the container died (exit code, OOM, its log's tail); None while it runs."""
        container = self.container
        if container is None:
            return None
        for _ in range(5):  # the engine marks it exited a moment after its ports close
            try:
                await _blocking(container.reload)
            except Exception as exc:  # removed under us: say so rather than guess
                return f"container {container.short_id} is gone ({exc})"
            how = _exit_of(container)
            if how is not None:
                break
            await asyncio.sleep(0.2)
        else:
            return None
        tail = await _blocking(_log_tail, container)
        return (
            f"container {container.short_id} {how} during the rollout; the last lines of "
            f"its log:\n{tail}"
        )
