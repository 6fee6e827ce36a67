"""``--hud-runtime=docker`` with no image: build one from the env modules' declarations.

The API, in full::

    spec = image_spec(files)          # ImageSpec: tag, modules, requires, apt
    tag = ensure_image(spec)          # build it unless an image with that tag exists
    auto = AutoDockerRuntime()        # the image of every env module declared so far
    provider = auto.serving(path)     # a provider serving the module at ``path`` in it

``placement.provider_for("docker")`` is ``by_declaration(AutoDockerRuntime().serving)``:
each row goes to the container serving its declaring module.

``image_spec(files)`` takes env module files (those that construct an ``Environment``;
see :func:`declared_files`) and gathers each environment's ``requires=[...]`` (pip) and
``apt=[...]`` (Debian) declarations. The image holds all of them at once, so a session
whose rows span several env modules (``examples/envs/pendulum.py`` + ``pusht.py``) runs
in one image; each container serves one module (``DockerRuntime(tag, module=...)``).

Where a module goes in the image: a file inside the ``pytest_hud`` package (the shipped
suites) is served by its dotted name, since the package is installed in the image; any
other file is copied alone to ``/app/envs/<n>/<its name>`` (a module that imports
sibling files must put them on a package path instead).

The tag is ``pytest-hud-env:<key>``, ``key`` a hash of the modules' sources, their
requires/apt and pytest-hud's own source, so any change builds a new image and an
unchanged session reuses the old one (a cache hit costs hashing the sources, ~0.1 s).
The pip folder and the apt root filesystem are cached on the host by their package
sets (:mod:`.docker_image`, :mod:`.docker_apt`). ``python -m pytest_hud image build``
(:mod:`.docker_cli`) prebuilds the same image.

Containers get the host's ``PYTEST_HUD_*`` variables (e.g.
``PYTEST_HUD_METAWORLD_CAMERAS``), so a module configured by them boots the same way
in the image (the MetaWorld module runs its render preflight only with cameras on).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from pytest_hud.loader import load_module
from pytest_hud.runtime.docker import DockerRuntime
from pytest_hud.runtime.docker_engine import LABEL, MODULE_ENV
from pytest_hud.runtime.docker_image import _hash_tree, _project, build_image
from pytest_hud.runtime.errors import PlacementError
from pytest_hud.runtime.modules import declared_environments
from pytest_hud.runtime.provider import Runtime
from pytest_hud.runtime.task import Task

__all__ = [
    "REPOSITORY",
    "AutoDockerRuntime",
    "ImageSpec",
    "declared_files",
    "ensure_image",
    "image_spec",
]

#: the repository of every image built here (``python -m pytest_hud image ls`` lists it)
REPOSITORY = "pytest-hud-env"
_PACKAGE = Path(__file__).resolve().parent.parent  # .../pytest_hud
_NOT_FORWARDED = frozenset({MODULE_ENV, "PYTEST_HUD_LIFELINE", "PYTEST_HUD_CACHE"})


@dataclass(frozen=True)
class ImageSpec:
    """What one auto-built image holds, and its tag."""

    tag: str
    #: host file -> what ``python -m pytest_hud.serve`` is given inside the image
    modules: dict[str, str] = field(default_factory=dict)
    #: ``/app`` destination -> host file, for modules copied in
    copies: dict[str, Path] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    apt: tuple[str, ...] = ()

    def labels(self) -> dict[str, str]:
        return {f"{LABEL}.auto": "1", f"{LABEL}.modules": json.dumps(sorted(self.modules))}


def declared_files() -> list[str]:
    """Every existing file that constructed an Environment in this process, sorted."""
    return sorted({p for _, p in declared_environments() if p and Path(p).is_file()})


def _in_package(path: Path) -> str | None:
    """The dotted name of a module inside pytest_hud (installed in every image), or None."""
    try:
        rel = path.resolve().relative_to(_PACKAGE.parent)
    except ValueError:
        return None
    if rel.parts[0] != _PACKAGE.name:
        return None
    parts = list(rel.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def image_spec(files: Iterable[str | Path]) -> ImageSpec:
    """The image serving ``files`` (env modules already imported in this process)."""
    paths = sorted({str(Path(f).resolve()) for f in files})
    if not paths:
        raise PlacementError(
            "--hud-runtime=docker with no image: expected at least one env module "
            "declaring an Environment (imported by a conftest.py or a test module), got "
            "none; fix: import the env module, or pass --hud-runtime=docker:IMAGE"
        )
    requires: list[str] = []
    apt: list[str] = []
    for env, path in declared_environments():
        if path and str(Path(path).resolve()) in paths:
            requires += [r for r in env.requires if r not in requires]
            apt += [a for a in env.apt if a not in apt]
    modules: dict[str, str] = {}
    copies: dict[str, Path] = {}
    digest = hashlib.sha256(json.dumps([sorted(requires), sorted(apt)]).encode())
    for n, path in enumerate(paths):
        dotted = _in_package(Path(path))
        if dotted is not None:
            modules[path] = dotted
            continue
        dest = f"envs/{n}/{Path(path).name}"
        modules[path], copies[dest] = f"/app/{dest}", Path(path)
        _hash_tree(digest, Path(path), dest)
    for part in _project()[1]:
        _hash_tree(digest, part, f"project/{part.name}")
    tag = f"{REPOSITORY}:{digest.hexdigest()[:16]}"
    return ImageSpec(tag, modules, copies, tuple(requires), tuple(apt))


def ensure_image(spec: ImageSpec, client: Any = None) -> str:
    """Build ``spec``'s image unless it is on the engine already; its tag."""
    return build_image(
        spec.tag,
        extra_files=spec.copies or None,
        packages=spec.requires,
        apt=spec.apt,
        labels=spec.labels(),
        client=client,
    )


def _module_file(path: str) -> str:
    """The file of an env module named by path or dotted name (importing the latter, so
    its Environments are declared before the image is specified)."""
    if Path(path).is_file():
        return str(Path(path).resolve())
    module = load_module(path)
    return str(Path(module.__file__).resolve()) if getattr(module, "__file__", None) else path


def _forwarded_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if k.startswith("PYTEST_HUD_") and k not in _NOT_FORWARDED
    }


class AutoDockerRuntime:
    """Serve each row in the auto-built image of every env module declared so far.

    The image is built (or found) on the first acquisition, in a worker thread, from
    :func:`declared_files` at that moment: by then pytest has imported every test
    module and conftest, so it covers all collected rows. ``kwargs`` go to each
    :class:`DockerRuntime` (``boot_timeout``, ``sim_ports``, ``client`` ...).
    """

    def __init__(self, files: Sequence[str | Path] | None = None, **kwargs: Any) -> None:
        self.files = list(files) if files is not None else None
        self.kwargs = kwargs
        self._lock = threading.Lock()
        self._spec: ImageSpec | None = None
        self._runtimes: dict[str, DockerRuntime] = {}

    def __repr__(self) -> str:
        return f"AutoDockerRuntime({self._spec.tag if self._spec else 'unbuilt'})"

    def spec(self) -> ImageSpec:
        """The image (built on first call; blocking)."""
        with self._lock:
            if self._spec is None:
                spec = image_spec(self.files if self.files is not None else declared_files())
                ensure_image(spec, self.kwargs.get("client"))
                self._spec = spec
            return self._spec

    def runtime_for(self, path: str) -> DockerRuntime:
        """The DockerRuntime serving the env module at ``path`` (a file or a dotted name,
        as a row's ``module`` column gives it) in the image (blocking)."""
        file = _module_file(path)
        spec = self.spec()
        module = spec.modules.get(file)
        if module is None:
            raise PlacementError(
                f"expected {path} to be one of the image's env modules "
                f"{sorted(spec.modules)}, got none (it was declared after the image was "
                "built); fix: import it from a conftest.py, or pass --hud-runtime=docker:IMAGE"
            )
        with self._lock:
            if module not in self._runtimes:
                kwargs = {"env": _forwarded_env(), **self.kwargs}
                self._runtimes[module] = DockerRuntime(spec.tag, module=module, **kwargs)
            return self._runtimes[module]

    def serving(self, path: str) -> Callable[[Task], _AutoSubstrate]:
        """A provider for rows declared by ``path``: a container of the image serving it."""
        return functools.partial(_AutoSubstrate, self, path)


class _AutoSubstrate:
    """Builds the image (in a thread, so the event loop keeps serving), then delegates."""

    def __init__(self, provider: AutoDockerRuntime, path: str, task: Task) -> None:
        self.provider = provider
        self.path = path
        self.task = task
        self.inner: Any = None

    async def __aenter__(self) -> Runtime:
        runtime = await asyncio.to_thread(self.provider.runtime_for, self.path)
        self.inner = runtime(self.task)
        return await self.inner.__aenter__()  # type: ignore[no-any-return]

    async def death(self) -> str | None:
        return await self.inner.death() if self.inner is not None else None

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.inner is not None:
            await self.inner.__aexit__(et, e, tb)
