"""The shape of an options table (flag, help, what else argparse is told, per option) and how
an option is read back. Its own module, below the core's and each feature's tables, which
options.py imports."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, TypedDict, TypeVar

import pytest

__all__ = ["OptionKwargs", "OptionTable", "read_option"]

T = TypeVar("T")


class OptionKwargs(TypedDict, total=False):
    """What an option passes to ``addoption`` beside its flag, dest, default and help (each
    option names the few it needs; a key argparse has that no option uses is left out)."""

    action: Literal["store_true", "append"]
    type: Callable[[str], object]
    choices: Sequence[str]
    metavar: str
    nargs: Literal["?"]
    const: str


#: (flag, help, kwargs) per option; its dest and ini name are the flag's (``--hud-x-y``: hud_x_y).
OptionTable = list[tuple[str, str, OptionKwargs]]


def read_option(config: pytest.Config, name: str, kind: Callable[[str], T]) -> T | None:
    """Option ``name`` (a dest, ``hud_x_y``) from the command line (as its table's ``type``
    parsed it), else its ini read as ``kind``; None where neither is set."""
    value: T | None = config.getoption(name)
    if value is None:
        raw = config.getini(name)
        if raw in (None, "", []):
            return None
        try:
            value = kind(raw)
        except ValueError:
            msg = f"ini option {name} = {raw!r} is not a valid {getattr(kind, '__name__', kind)}"
            raise pytest.UsageError(msg) from None
    return value
