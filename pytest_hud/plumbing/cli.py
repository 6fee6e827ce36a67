"""What the package's commands share in reading their command lines."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["command_parser", "from_args"]

T = TypeVar("T", bound="DataclassInstance")


def from_args(cls: type[T], args: argparse.Namespace, **given: object) -> T:
    """The dataclass ``cls`` from a parsed command line: each field an option of the same
    dest sets is taken from ``args``, and ``given`` sets the fields the command derives
    (a resolved path, a value read from a file) or the options do not have."""
    taken = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(cls)
        if f.name not in given and hasattr(args, f.name)
    }
    return cls(**taken, **given)


def command_parser(
    command: str, description: str, *, agent: bool = False
) -> argparse.ArgumentParser:
    """The command line of ``python -m pytest_hud COMMAND``; with ``agent``, its required
    ``--agent SPEC``, an agent spec as ``--hud-agent`` takes."""
    parser = argparse.ArgumentParser(
        prog=f"python -m pytest_hud {command}", description=description
    )
    if agent:
        parser.add_argument("--agent", required=True, help="agent spec, as for --hud-agent")
    return parser
