"""The subprocess entry of the backends table (runtime/backends.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_hud.runtime.backends import BackendParts

if TYPE_CHECKING:
    from pytest_hud.runtime.backends import RuntimeSpec
    from pytest_hud.runtime.provider import Provider

__all__ = ["PARTS", "provider"]


def provider(spec: RuntimeSpec) -> Provider:
    """``--hud-runtime=subprocess[:PYTHON]`` (runtime/backends.py): each row served by a child
    process (of PYTHON, e.g. a LIBERO venv's) from the module that declares its env."""
    from pytest_hud.runtime.routing import by_declaration, undeclared
    from pytest_hud.runtime.subprocess import SubprocessRuntime

    python = spec.arg or None
    return by_declaration(lambda path: SubprocessRuntime(path, python=python), undeclared)


PARTS = BackendParts(provider=provider)
