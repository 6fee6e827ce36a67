"""The cloud sandboxes' entries of the backends table (runtime/backends.py): ``modal[:IMAGE]``
(Daytona is used through :class:`DaytonaRuntime` in a conftest, not a ``--hud-runtime`` kind)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_hud.runtime.backends import RuntimeSpec
    from pytest_hud.runtime.provider import Provider

__all__ = ["provider"]


def provider(spec: RuntimeSpec) -> Provider:
    from pytest_hud.runtime.sandbox.modal import ModalRuntime

    return ModalRuntime(spec.arg or None)
