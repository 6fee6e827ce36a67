"""The tcp and ws entries of the backends table (runtime/backends.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_hud.plumbing.auth import borrowed_token
from pytest_hud.runtime.backends import BackendParts
from pytest_hud.runtime.provider import Runtime

if TYPE_CHECKING:
    from pytest_hud.runtime.backends import RuntimeSpec
    from pytest_hud.runtime.provider import Provider

__all__ = ["PARTS", "provider"]


def provider(spec: RuntimeSpec) -> Provider:
    """``--hud-runtime=tcp://HOST:PORT`` or ``ws://...`` (runtime/backends.py): a running env
    server, borrowed (nothing to boot or tear down). Its token comes from
    ``$PYTEST_HUD_RUNTIME_TOKEN`` or, for a server started by hand on this host, the file it
    keeps it in (a ``?token=`` in the url is still taken, and kept out of every record)."""
    token = borrowed_token(spec.raw)
    runtime = Runtime(spec.raw)
    if token is None:
        return runtime
    return Runtime(runtime.url, {**runtime.params, "token": token}, runtime.config)


PARTS = BackendParts(provider=provider)
