"""What the package's commands share in reading their command lines."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["add_options", "command_parser", "from_args", "option"]

T = TypeVar("T", bound="DataclassInstance")
#: the metadata key of an :func:`option` field
_OPTION = "pytest_hud.cli.option"


def option(flag: str, help: str, default: Any = None, **argument: Any) -> Any:
    """A field of a command's dataclass that is also its option ``flag``: the default and the
    help said once (``%(default)s`` in ``help`` shows the default); ``argument``: the rest of
    ``add_argument``'s keywords (``type``, ``action``...). :func:`add_options` declares it."""
    return dataclasses.field(default=default, metadata={_OPTION: (flag, help, argument)})


def add_options(parser: argparse.ArgumentParser, cls: type[DataclassInstance]) -> None:
    """Each :func:`option` field of ``cls`` as an option of ``parser``, in field order, with
    the field's name as its dest and the field's default as its own."""
    for f in dataclasses.fields(cls):
        if _OPTION in f.metadata:
            flag, help, argument = f.metadata[_OPTION]
            parser.add_argument(flag, dest=f.name, default=f.default, help=help, **argument)


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
