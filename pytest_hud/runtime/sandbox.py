"""What the cloud sandbox runtimes (:mod:`.modal`, :mod:`.daytona`) share: the env server a
sandbox boots (its image, module, resources and lifetime, the control and sim ports, each
declared once with its default), the environment it gets, and how the SDK is imported."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, TypedDict

from pytest_hud.plumbing.auth import auth_env
from pytest_hud.runtime.substrate import serve_ports, setting
from pytest_hud.runtime.task import Task, memory_mib

__all__ = ["SandboxOptions", "SandboxRuntime", "import_sdk"]


class SandboxOptions(TypedDict, total=False):
    """The keywords every sandbox runtime takes beside its image (:class:`SandboxRuntime`)."""

    cpu: float | None
    gpu: int | str | None
    memory: int | str | None
    timeout: float
    boot_timeout: float
    sim_ports: int


def import_sdk(module: str, missing: str) -> ModuleType:
    """The cloud SDK ``module``; ImportError saying ``missing`` (how to install it) when it
    is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(missing) from exc


class SandboxRuntime:
    """A fresh env server serving ``module`` in a sandbox from ``image`` per acquisition:
    ``cpu``, ``gpu`` (a count or a type, as the cloud takes it) and ``memory`` (MiB or like
    ``"4Gi"``, checked here), each overridden by a row's ``runtime_config``
    (:meth:`resources`); a lifetime ``timeout`` and a ``boot_timeout`` in seconds; the
    control port and ``sim_ports`` sim ports."""

    #: a sandbox boots in seconds: the plugin boots the next rows' ahead (runtime/warm.py)
    warm_ahead = True

    def __init__(
        self,
        image: object,
        module: str | None,
        *,
        cpu: float | None = None,
        gpu: int | str | None = None,
        memory: int | str | None = None,
        timeout: float = 3600,
        boot_timeout: float = 600,
        sim_ports: int = 8,
    ) -> None:
        self.image = image
        self.module = module
        self.cpu, self.gpu = cpu, gpu
        self.memory = memory
        memory_mib(memory)  # fail early on a malformed value
        self.timeout = timeout
        self.boot_timeout = boot_timeout
        self.ports = serve_ports(sim_ports)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.image!r}, module={self.module!r})"

    def server_env(self, task: Task) -> dict[str, str]:
        """The env server's environment: the row's ``runtime_config.env``, then the session's
        secret (the server behind a public tunnel or gateway serves this session only)."""
        cfg = task.runtime_config
        return {**(dict(cfg.env) if cfg is not None and cfg.env else {}), **auth_env()}

    def resources(self, task: Task) -> tuple[Any, Any, int | None]:
        """``task``'s cpu, gpu and memory in MiB: its ``runtime_config``'s, else this
        runtime's (None: the cloud's default)."""
        memory = memory_mib(setting(task, "memory", self.memory))
        return setting(task, "cpu", self.cpu), setting(task, "gpu", self.gpu), memory
