"""Every ``--hud-runtime`` backend, in one table: the kind a value starts with, the provider it
builds, and how a session treats it (boot ahead, rows routed by declaration, a check before any
item, a sweep at the end). Nothing else names a backend: the plugin, ``check``, the warm pool
and the features ask this table. Adding one: a folder under ``runtime/`` with its provider and
a ``backend.py``, and one entry below (docs/contributing.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pytest_hud.runtime.errors import PlacementError

if TYPE_CHECKING:
    from pytest_hud.runtime.provider import Provider

__all__ = ["BACKENDS", "DEFAULT", "Backend", "RuntimeSpec", "SessionCluster", "forms", "parse"]


class SessionCluster(Protocol):
    """A cluster one session started for its xdist workers to share."""

    @property
    def kind(self) -> str: ...  # what it is, for the terminal line: "Ray"

    @property
    def address(self) -> str: ...

    @property
    def where(self) -> str: ...  # where its files are, for the terminal line

    def stop(self) -> None: ...


@dataclass(frozen=True)
class RuntimeSpec:
    """One ``--hud-runtime`` value, parsed: ``kind[:arg]`` (``raw`` whole)."""

    raw: str
    kind: str
    arg: str
    base: str | None = None  # --hud-docker-base: the image a building backend builds FROM

    @property
    def backend(self) -> Backend:
        return BACKENDS[self.kind]

    @property
    def image(self) -> str | None:
        """The image the value names, for provenance (``docker:IMAGE``, ``modal:IMAGE``)."""
        return self.arg if self.backend.images and self.arg else None

    @property
    def cluster(self) -> str | None:
        """The cluster address the value names (None: none named, or not a cluster)."""
        find = self.backend.address
        return find(self) if find is not None else None

    def build(self) -> Provider:
        return self.backend.provider(self)


@dataclass(frozen=True)
class Backend:
    """What a kind means. ``module`` holds its callables (imported on first use):
    ``provider(spec)`` always; where they apply, ``preflight(spec, say)`` (the check before
    any item; ``say`` prints a progress line), ``reap()`` (the controller's sweep at
    unconfigure), ``address(spec)`` (the cluster it joins) and ``start_cluster()`` (one
    cluster for a ``-n K`` session that names none)."""

    kind: str
    forms: tuple[str, ...]  # its spellings, for help and errors
    module: str  # dotted; a leading dot: under pytest_hud.runtime
    warm: bool = False  # a boot worth hiding: substrates booted ahead (runtime/warm.py)
    routed: bool = False  # rows served from this process's module declaring their env
    images: bool = False  # its argument names an image
    builds: bool = False  # builds images FROM a base (--hud-docker-base)

    def part(self, name: str) -> Callable[..., Any] | None:
        """The module's callable ``name``, or None where the backend has none."""
        found = getattr(importlib.import_module(self.module, __package__), name, None)
        return found if callable(found) else None

    @property
    def provider(self) -> Callable[[RuntimeSpec], Provider]:
        build = self.part("provider")
        if build is None:
            raise TypeError(f"backend {self.kind!r}: {self.module} has no provider(spec)")
        return build

    @property
    def preflight(self) -> Callable[[RuntimeSpec, Callable[[str], None]], None] | None:
        return self.part("preflight")

    @property
    def reap(self) -> Callable[[], None] | None:
        return self.part("reap")

    @property
    def address(self) -> Callable[[RuntimeSpec], str | None] | None:
        return self.part("address")

    @property
    def cluster(self) -> Callable[[], SessionCluster] | None:
        return self.part("start_cluster")


#: kind -> Backend, for every ``--hud-runtime`` kind (one entry a backend).
BACKENDS: dict[str, Backend] = {
    b.kind: b
    for b in [
        Backend("local", ("local",), ".local", routed=True),
        Backend("subprocess", ("subprocess[:PYTHON]",), ".subprocess", warm=True, routed=True),
        Backend("docker", ("docker[:IMAGE]",), ".docker.backend", warm=True, images=True, builds=True),  # noqa: E501
        Backend("modal", ("modal[:IMAGE]",), ".sandbox.backend", warm=True, images=True),
        Backend("ray", ("ray", "ray:HOST:PORT", "ray://HOST:PORT"), ".ray.backend"),
        Backend("tcp", ("tcp://HOST:PORT",), ".control"),
        Backend("ws", ("ws://HOST:PORT",), ".control"),
    ]
}  # fmt: skip

#: The kind ``--hud-runtime`` defaults to.
DEFAULT = "local"


def forms() -> str:
    """Every spelling, for help texts and errors: ``local, subprocess[:PYTHON], ...``."""
    return ", ".join(form for b in BACKENDS.values() for form in b.forms)


def parse(raw: str, base: str | None = None) -> RuntimeSpec:
    """The backend ``raw`` names; PlacementError naming every valid form if none."""
    kind, _, arg = raw.partition(":")
    if kind not in BACKENDS:
        raise PlacementError(f"unknown --hud-runtime {raw!r}; valid forms: {forms()}")
    return RuntimeSpec(raw, kind, arg, base)
