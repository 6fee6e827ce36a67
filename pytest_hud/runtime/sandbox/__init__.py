"""Cloud sandboxes as substrates: a fresh env server per acquisition in a Modal sandbox
(:mod:`.modal`) or a Daytona sandbox (:mod:`.daytona`); both boot, wait and tear down
through :mod:`pytest_hud.runtime.substrate`."""

from typing import TYPE_CHECKING

from pytest_hud.plumbing.lazy import exports

if TYPE_CHECKING:
    from pytest_hud.runtime.sandbox.daytona import DaytonaRuntime
    from pytest_hud.runtime.sandbox.modal import ModalRuntime

__getattr__, __dir__ = exports(__name__, __file__)

__all__ = ["DaytonaRuntime", "ModalRuntime"]
