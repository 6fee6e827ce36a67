"""Every ``--hud-runtime`` backend, in one table: the kind a value starts with, the folder of its
own it lives in, and how a session treats it (boot ahead, rows routed by declaration, an image
argument, images built from a base). Each backend's ``backend.py`` holds a :class:`BackendParts`
(``PARTS``): the provider it builds and, where they apply, a check before any item, a sweep at
the end, the cluster it joins, an image's digest. Nothing else names a backend: the plugin,
``check``, the warm pool and the features ask this table. Adding one: a folder under
``runtime/`` with its provider and a ``backend.py``, and one entry below (docs/contributing.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pytest_hud.errors import PlacementError

if TYPE_CHECKING:
    from pytest_hud.runtime.provider import Provider

__all__ = [
    "BACKENDS",
    "DEFAULT",
    "Backend",
    "BackendParts",
    "RuntimeSpec",
    "SessionCluster",
    "forms",
    "parse",
]


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
        find = self.backend.parts.address
        return find(self) if find is not None else None

    def build(self) -> Provider:
        return self.backend.parts.provider(self)


@dataclass(frozen=True)
class BackendParts:
    """What a backend's ``backend.py`` gives the session (its ``PARTS``): ``provider(spec)``
    always; where they apply, ``preflight(spec, say)`` (the check before any item; ``say``
    prints a progress line), ``reap()`` (the controller's sweep at unconfigure),
    ``address(spec)`` (the cluster it joins), ``start_cluster()`` (one cluster for a ``-n K``
    session that names none) and ``image_digest(image)`` (for the run's provenance)."""

    provider: Callable[[RuntimeSpec], Provider]
    preflight: Callable[[RuntimeSpec, Callable[[str], None]], None] | None = None
    reap: Callable[[], None] | None = None
    address: Callable[[RuntimeSpec], str | None] | None = None
    start_cluster: Callable[[], SessionCluster] | None = None
    image_digest: Callable[[str], str | None] | None = None


@dataclass(frozen=True)
class Backend:
    """What a kind means. ``module``: its ``backend.py`` (dotted; a leading dot: under
    pytest_hud.runtime), whose ``PARTS`` are imported on first use."""

    kind: str
    forms: tuple[str, ...]  # its spellings, for help and errors
    module: str
    warm: bool = False  # a boot worth hiding: substrates booted ahead (runtime/warm.py)
    routed: bool = False  # rows served from this process's module declaring their env
    images: bool = False  # its argument names an image
    builds: bool = False  # builds images FROM a base (--hud-docker-base)

    @property
    def parts(self) -> BackendParts:
        """The backend module's :class:`BackendParts`; TypeError naming the module without."""
        found = getattr(importlib.import_module(self.module, __package__), "PARTS", None)
        if not isinstance(found, BackendParts):
            raise TypeError(
                f"backend {self.kind!r}: expected {self.module} to define PARTS = "
                f"BackendParts(provider=...), got {type(found).__name__}"
            )
        return found


#: kind -> Backend, for every ``--hud-runtime`` kind (one entry a backend). Each lives in
#: ``runtime/KIND/`` but two: ``local``, the in-process server the runtime core itself falls
#: back to (placement without a runtime), is the core's ``runtime/local.py``; ``ws`` is
#: ``tcp``'s client over a WebSocket, in ``runtime/tcp/``. (Daytona, ``runtime/daytona/``, is
#: a provider users build in a conftest, not a kind.)
BACKENDS: dict[str, Backend] = {
    b.kind: b
    for b in [
        Backend("local", ("local",), ".local", routed=True),
        Backend("subprocess", ("subprocess[:PYTHON]",), ".subprocess.backend", warm=True, routed=True),  # noqa: E501
        Backend("docker", ("docker[:IMAGE]",), ".docker.backend", warm=True, images=True, builds=True),  # noqa: E501
        Backend("modal", ("modal[:IMAGE]",), ".modal.backend", warm=True, images=True),
        Backend("ray", ("ray", "ray:HOST:PORT", "ray://HOST:PORT"), ".ray.backend"),
        Backend("tcp", ("tcp://HOST:PORT",), ".tcp.backend"),
        Backend("ws", ("ws://HOST:PORT",), ".tcp.backend"),
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
