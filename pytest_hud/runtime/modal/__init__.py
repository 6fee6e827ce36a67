"""ModalRuntime: a fresh env server in a Modal sandbox for every acquisition, behind raw-TCP
tunnels. Only the SDK's ``.aio`` calls are used, so booting never blocks the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from types import ModuleType
from typing import Any, Unpack

from pytest_hud.errors import SubstrateError
from pytest_hud.runtime.provider import Runtime
from pytest_hud.runtime.sandbox import SandboxOptions, SandboxRuntime, import_sdk
from pytest_hud.runtime.substrate import (
    CONTROL_PORT,
    PingedSubstrate,
    bounded,
    serve_argv,
    setting,
)
from pytest_hud.runtime.task import Task

__all__ = ["ModalRuntime"]

_IO_TIMEOUT = 10.0  # bound on terminate and on reading a sandbox's output
_MISSING = "ModalRuntime needs the Modal SDK: pip install 'pytest-hud[modal]'"


class _ModalSubstrate(PingedSubstrate):
    kind = "modal sandbox"
    # a tunnel may accept before the server listens; a sandbox's streams end with it
    pacing = {"delay": 0.25, "max_delay": 2.0, "factor": 2.0, "attempt": 10.0}
    output_after_stop = True

    def __init__(self, owner: ModalRuntime, task: Task) -> None:
        super().__init__(task, owner.boot_timeout)
        self.owner = owner
        self.sandbox: Any = None
        self.tunnels: Any = None

    def ident(self) -> str:
        return str(getattr(self.sandbox, "object_id", None) or "(not created)")

    async def start(self) -> None:
        owner, modal = self.owner, self.owner.modal
        kwargs = owner.sandbox_kwargs(self.task)
        try:
            app = await owner.app()
            self.sandbox = await modal.Sandbox.create.aio(*owner.command(), app=app, **kwargs)
        except Exception as exc:
            raise SubstrateError(
                f"{self.task.key}: modal Sandbox.create failed: {type(exc).__name__}: {exc}"
            ) from exc

    async def endpoint(self) -> Runtime | None:
        owner = self.owner
        remaining = max(1, int(self.deadline - asyncio.get_running_loop().time()))
        try:
            tunnels = await self.sandbox.tunnels.aio(timeout=remaining)
        except Exception as exc:
            if await self.stopped() is not None:
                return None  # the next probe reports the exit
            raise SubstrateError(
                f"{self.task.key}: {self.name} gave no tunnels: {type(exc).__name__}: {exc}"
            ) from exc
        missing = [p for p in owner.ports if p not in tunnels]
        if missing:
            raise SubstrateError(
                f"{self.task.key}: {self.name} has no tunnel for port(s) {missing} (it has "
                f"{sorted(tunnels)})"
            )
        host, port = tunnels[CONTROL_PORT].tcp_socket
        port_map = {}
        for sim_port in owner.ports[1:]:
            sim_host, sim_tunnel_port = tunnels[sim_port].tcp_socket
            port_map[str(sim_port)] = f"{sim_host}:{sim_tunnel_port}"
        params = {"kind": "modal", "sandbox": self.ident(), "host": host, "port_map": port_map}
        return Runtime(f"tcp://{host}:{port}", params, self.task.runtime_config)

    async def stopped(self) -> str | None:
        code = await self.sandbox.poll.aio()
        return None if code is None else f"exited with code {code}"

    async def output(self) -> str:
        if self.sandbox is None:
            return "(no sandbox)"
        parts = []
        for stream in ("stdout", "stderr"):
            with contextlib.suppress(Exception):
                async with asyncio.timeout(_IO_TIMEOUT):
                    text = await getattr(self.sandbox, stream).read.aio()
                    if text:
                        parts.append(text if isinstance(text, str) else text.decode("replace"))
        return "".join(parts)

    async def stop(self) -> None:
        if self.sandbox is not None:
            await bounded(self.sandbox.terminate.aio(), _IO_TIMEOUT)


class ModalRuntime(SandboxRuntime):
    """Serve an env module in a fresh Modal sandbox per acquisition (see the module docs).

    ``image`` is a ``modal.Image`` or a registry tag; ``options`` are every sandbox's
    (:class:`~pytest_hud.runtime.sandbox.SandboxOptions`: ``cpu``, ``gpu`` a type such as
    ``"T4"``, ``memory``, ``timeout``, ``boot_timeout``, ``sim_ports``). A row's ``runtime_config``
    (``image``, ``gpu``, ``cpu``, ``memory``, ``timeout``, ``env``) overrides the
    constructor's values; ``memory`` is MiB or a string like ``"4Gi"``; ``timeout``
    is the sandbox's lifetime in seconds. ``modal`` injects the SDK module.
    """

    def __init__(
        self,
        image: object,
        *,
        module: str | None = None,
        app_name: str = "pytest-hud",
        secrets: list[object] | None = None,
        modal: ModuleType | Any = None,
        **options: Unpack[SandboxOptions],
    ) -> None:
        self.modal = modal if modal is not None else import_sdk("modal", _MISSING)
        super().__init__(image, module, **options)
        self.app_name = app_name
        self.secrets = list(secrets or [])
        self._app: object = None
        self._images: dict[str, object] = {}

    def __call__(self, task: Task, /) -> _ModalSubstrate:
        return _ModalSubstrate(self, task)

    def command(self) -> list[str]:
        """The sandbox's command; empty (the image's CMD) when ``module`` is None."""
        if self.module is None:
            return []
        return serve_argv("python", self.module, "0.0.0.0", len(self.ports) - 1)

    async def app(self) -> object:
        if self._app is None:
            self._app = await self.modal.App.lookup.aio(self.app_name, create_if_missing=True)
        return self._app

    def resolve_image(self, image: object) -> object:
        if not isinstance(image, str):
            return image
        if image not in self._images:
            self._images[image] = self.modal.Image.from_registry(image)
        return self._images[image]

    def sandbox_kwargs(self, task: Task) -> dict[str, object]:
        """Sandbox.create's keyword arguments for ``task`` (its runtime_config wins)."""
        timeout = setting(task, "timeout", self.timeout)
        kwargs: dict[str, object] = {
            "image": self.resolve_image(setting(task, "image", self.image)),
            "timeout": math.ceil(timeout),
            "unencrypted_ports": list(self.ports),
        }
        cpu, gpu, memory = self.resources(task)
        if gpu is not None:
            kwargs["gpu"] = gpu
        if cpu is not None:
            kwargs["cpu"] = float(cpu)
        if memory is not None:
            kwargs["memory"] = memory
        if self.secrets:
            kwargs["secrets"] = list(self.secrets)
        kwargs["env"] = self.server_env(task)
        return kwargs
