"""What the cloud sandbox runtimes (:mod:`.modal`, :mod:`.daytona`) share: the env server a
sandbox boots (its image, module, memory and lifetime, the control and sim ports), the
environment it gets, and how the SDK is imported."""

from __future__ import annotations

import importlib
from types import ModuleType

from pytest_hud.plumbing.auth import auth_env
from pytest_hud.runtime.substrate import serve_ports
from pytest_hud.runtime.task import Task, memory_mib

__all__ = ["SandboxRuntime", "import_sdk"]


def import_sdk(module: str, missing: str) -> ModuleType:
    """The cloud SDK ``module``; ImportError saying ``missing`` (how to install it) when it
    is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(missing) from exc


class SandboxRuntime:
    """A fresh env server serving ``module`` in a sandbox from ``image`` per acquisition:
    ``memory`` (MiB or like ``"4Gi"``, checked here), a lifetime ``timeout`` and a
    ``boot_timeout`` in seconds, the control port and ``sim_ports`` sim ports."""

    #: a sandbox boots in seconds: the plugin boots the next rows' ahead (runtime/warm.py)
    warm_ahead = True

    def __init__(
        self,
        image: object,
        module: str | None,
        memory: int | str | None,
        timeout: float,
        boot_timeout: float,
        sim_ports: int,
    ) -> None:
        self.image = image
        self.module = module
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
