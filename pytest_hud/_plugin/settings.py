"""Options declared once: each is a field of a frozen settings dataclass whose :func:`option`
carries its flag, help, type, default and check. :func:`add_options` declares a settings class's
options (each with an ini of its name), :func:`read_settings` reads them (the command line, else
the ini, else the default), checks each and returns the frozen settings. The core's options are
:class:`~pytest_hud._plugin.options.HudOptions`; each feature has a settings class of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, dataclass_transform

import pytest

from pytest_hud._plugin.internals import from_controller

__all__ = [
    "FeatureSettings",
    "Option",
    "add_options",
    "handed",
    "option",
    "options_of",
    "path_option",
    "read_settings",
    "read_value",
]

S = TypeVar("S")
T = TypeVar("T")

#: how an option takes its value: one value, a yes/no flag, or repeated values
Kind = Literal["value", "flag", "list"]


@dataclass(frozen=True)
class Option:
    """One command-line option and its ini (see the module docs).

    ``parse`` turns the text given (on the command line or in the ini) into the value; a
    ValueError it raises is the message after the flag (``int`` and ``float`` say what they
    expected). ``check`` returns what is wrong with a parsed value, or None. ``read``
    replaces the whole reading for an option whose value comes from elsewhere too (an xdist
    worker takes the controller's)."""

    flag: str
    help: str
    parse: Callable[[str], object] | None = None
    kind: Kind = "value"
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    const: str | None = None  # the value of a bare ``--flag`` (nargs="?")
    check: Callable[[Any], str | None] | None = None
    read: Callable[[pytest.Config], object] | None = None

    @property
    def dest(self) -> str:
        """Its argparse dest and ini name: ``--hud-x-y`` -> ``hud_x_y``."""
        return self.flag[2:].replace("-", "_")

    def parsed(self, text: str) -> object:
        """``text`` as this option's value; a usage error naming the flag when it is not one."""
        if self.parse is None:
            return text
        try:
            return self.parse(text)
        except ValueError as exc:
            what = _EXPECTED.get(self.parse)
            problem = f"expected {what}, got {text!r}" if what else str(exc)
            raise pytest.UsageError(_named(self.flag, problem)) from None


def _named(flag: str, problem: str) -> str:
    """``problem`` after the flag it is about (as it is, where it names the flag itself)."""
    if problem.startswith(flag):
        return problem
    return f"{flag}{problem}" if problem.startswith((":", "=")) else f"{flag} {problem}"


#: what a plain type's parse expects, for its message
_EXPECTED: dict[object, str] = {int: "a whole number", float: "a number"}


def option(
    flag: str,
    help: str,
    *,
    default: object = None,
    factory: Callable[[], object] | None = None,
    parse: Callable[[str], object] | None = None,
    kind: Kind = "value",
    choices: Sequence[str] = (),
    metavar: str | None = None,
    const: str | None = None,
    check: Callable[[Any], str | None] | None = None,
    read: Callable[[pytest.Config], object] | None = None,
) -> Any:
    """A settings field that is an option: ``x: int | None = option("--hud-x", "help")``."""
    spec = Option(flag, help, parse, kind, tuple(choices), metavar, const, check, read)
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata={"option": spec})
    return dataclasses.field(default=default, metadata={"option": spec})


def path_option(flag: str, help: str, *, exists: str | None = None) -> Any:
    """A settings field that is an option naming a file, read as a Path; with ``exists`` (what
    to pass instead), one that must exist: ``--hud-x: P does not exist; fix: EXISTS``."""
    if exists is None:
        return option(flag, help, parse=Path)

    def check(path: Path) -> str | None:
        return None if path.exists() else f": {path} does not exist; fix: {exists}"

    return option(flag, help, parse=Path, check=check)


def handed(key: str) -> Any:
    """A settings field an xdist worker takes from its controller (``workerinput[key]``, put
    there in ``pytest_configure_node``); None elsewhere."""
    return dataclasses.field(default=None, metadata={"handed": key})


@dataclass_transform(frozen_default=True)
class FeatureSettings:
    """A feature's settings: a subclass declares each of its options once, as a field
    (``x: int | None = option("--hud-x", "help")``, or :func:`handed`), and is a frozen
    dataclass of them (read once at configure, never changed)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclass(frozen=True)(cls)


def options_of(cls: type) -> list[tuple[str, Option]]:
    """(field name, option) of every option field of settings class ``cls``, in order."""
    return [
        (f.name, f.metadata["option"]) for f in dataclasses.fields(cls) if "option" in f.metadata
    ]


def add_options(parser: pytest.Parser, cls: type) -> None:
    """Declare ``cls``'s options in pytest-hud's group, each with an ini of its name."""
    group = parser.getgroup("hud", "pytest-hud: policy evaluation")
    for _, opt in options_of(cls):
        kwargs: dict[str, Any] = {}
        if opt.kind == "flag":
            kwargs["action"] = "store_true"
        elif opt.kind == "list":
            kwargs["action"] = "append"
        if opt.choices:
            kwargs["choices"] = list(opt.choices)
        if opt.metavar is not None:
            kwargs["metavar"] = opt.metavar
        if opt.const is not None:
            kwargs["nargs"], kwargs["const"] = "?", opt.const
        group.addoption(opt.flag, dest=opt.dest, default=None, help=opt.help, **kwargs)
        text = opt.help.replace("%%", "%")
        if opt.kind == "flag":  # its ini: true/false, yes/no, 1/0
            parser.addini(opt.dest, help=text, type="bool", default=None)
        else:
            parser.addini(opt.dest, help=text, default=None)


def read_value(config: pytest.Config, opt: Option) -> object:
    """``opt``'s value: the command line's, else its ini's (a list option's ini: values
    separated by whitespace), parsed; else None."""
    if opt.read is not None:
        return opt.read(config)
    value = config.getoption(opt.dest, None)
    if opt.kind == "flag":
        return bool(value or config.getini(opt.dest))
    if value in (None, []):
        raw = config.getini(opt.dest)
        if raw in (None, "", []):
            return None
        value = str(raw).split() if opt.kind == "list" else str(raw)
    if opt.kind == "list":
        return [opt.parsed(str(v)) for v in value]
    return opt.parsed(str(value))


def read_settings(config: pytest.Config, cls: type[S], **given: object) -> S:
    """``cls`` read from ``config`` (fields that are not options come from ``given``, else
    their defaults); each value's check runs, and the first failure is one usage error."""
    values: dict[str, object] = dict(given)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if "handed" in f.metadata:
            values[f.name] = from_controller(config, f.metadata["handed"])
    for name, opt in options_of(cls):
        value = read_value(config, opt)
        if value is None or value == []:
            continue
        if opt.check is not None:
            problem = opt.check(value)
            if problem is not None:
                raise pytest.UsageError(_named(opt.flag, problem))
        values[name] = value
    try:
        return cls(**values)
    except ValueError as exc:  # a check across fields (the class's __post_init__)
        raise pytest.UsageError(str(exc)) from None
