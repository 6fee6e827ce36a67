"""The modal entry of the backends table (runtime/backends.py): ``modal[:IMAGE]``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_hud.runtime.backends import BackendParts

if TYPE_CHECKING:
    from pytest_hud.runtime.backends import RuntimeSpec
    from pytest_hud.runtime.provider import Provider

__all__ = ["PARTS", "provider"]


def provider(spec: RuntimeSpec) -> Provider:
    from pytest_hud.runtime.modal import ModalRuntime

    return ModalRuntime(spec.arg or None)


PARTS = BackendParts(provider=provider)
