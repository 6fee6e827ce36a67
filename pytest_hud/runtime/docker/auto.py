"""``--hud-runtime=docker`` with no image: build one from the env modules' ``requires=`` /
``apt=``.

The tag hashes the modules, their requirements and pytest-hud's source: any change rebuilds, an
unchanged session reuses the image.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from pytest_hud.errors import PlacementError
from pytest_hud.plumbing.loader import load_module
from pytest_hud.runtime.docker.container import DockerRuntime
from pytest_hud.runtime.docker.engine import LABEL, RENDER_VARS
from pytest_hud.runtime.docker.groups import image_groups
from pytest_hud.runtime.docker.image import (
    _hash_tree,
    _project,
    _requirements,
    build_image,
    cache_dir,
)
from pytest_hud.runtime.modules import declared_environments
from pytest_hud.runtime.provider import Runtime
from pytest_hud.runtime.task import Task

__all__ = [
    "RENDER_VARS",
    "REPOSITORY",
    "AutoDockerRuntime",
    "ImageSpec",
    "declared_files",
    "ensure_image",
    "image_spec",
    "image_specs",
]

log = logging.getLogger(__name__)

#: the repository of every image built here (``python -m pytest_hud image ls`` lists it)
REPOSITORY = "pytest-hud-env"
_PACKAGE = Path(__file__).resolve().parents[2]  # .../pytest_hud


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


def _paths(files: Iterable[str | Path]) -> list[str]:
    paths = sorted({str(Path(f).resolve()) for f in files})
    if not paths:
        raise PlacementError(
            "--hud-runtime=docker with no image: expected at least one env module "
            "declaring an Environment (imported by a conftest.py or a test module), got "
            "none; fix: import the env module, or pass --hud-runtime=docker:IMAGE"
        )
    return paths


def _declared(paths: Sequence[str]) -> dict[str, tuple[list[str], list[str]]]:
    """path -> (requires, apt) of the Environments each file declared, in order."""
    out: dict[str, tuple[list[str], list[str]]] = {p: ([], []) for p in paths}
    for env, path in declared_environments():
        key = str(Path(path).resolve()) if path else None
        if key in out:
            requires, apt = out[key]
            requires += [r for r in env.requires if r not in requires]
            apt += [a for a in env.apt if a not in apt]
    return out


def image_spec(files: Iterable[str | Path]) -> ImageSpec:
    """The one image serving all ``files`` (env modules already imported in this process)."""
    paths = _paths(files)
    declared = _declared(paths)
    requires: list[str] = []
    apt: list[str] = []
    for path in paths:
        requires += [r for r in declared[path][0] if r not in requires]
        apt += [a for a in declared[path][1] if a not in apt]
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


def image_specs(files: Iterable[str | Path]) -> list[ImageSpec]:
    """The images serving ``files``: one, unless their requirements clash
    (:mod:`.groups`), then one per env module declaring requirements."""
    paths = _paths(files)
    requires = {p: r for p, (r, _) in _declared(paths).items()}
    groups, reason = image_groups(requires, _requirements(()), cache_dir())
    if reason:
        log.warning(
            "env modules %s cannot share one image (pip: %s): one image each",
            ", ".join(_in_package(Path(p)) or p for p in paths),
            reason,
        )
    return [image_spec(group) for group in groups]


def ensure_image(spec: ImageSpec, client: object = None, base: str | None = None) -> str:
    """Build ``spec``'s image (FROM ``base``, default :func:`.base.ensure_base`'s) unless it
    is on the engine already; its tag."""
    return build_image(
        spec.tag,
        base=base,
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


def sim_ports(file: str) -> int:
    """Sim ports to publish for the env module ``file``: one per robot capability its
    Environments declare (at least one). DockerRuntime's default, 8, spawns 9
    ``docker-proxy`` processes per container, and a container's boot CPU is what bounds
    how many the warm pool can hide."""
    from pytest_hud.robot.sim.endpoint import RobotEndpoint

    here = Path(file).resolve()
    robots = sum(
        isinstance(capability, RobotEndpoint)
        for env, path in declared_environments()
        if path and Path(path).resolve() == here
        for capability in env.capabilities.values()
    )
    return max(robots, 1)


class AutoDockerRuntime:
    """Serve each row in the auto-built image of every env module declared so far.

    The images are specified on the first acquisition, in a worker thread, from
    :func:`declared_files` at that moment: by then pytest has imported every test
    module and conftest, so they cover all collected rows. Usually one image; one per
    env module when their requirements clash (:func:`image_specs`); each is built (or
    found) on the first acquisition of a row it serves, FROM ``base`` (default: see
    :func:`.base.ensure_base`). ``kwargs`` go to each :class:`DockerRuntime`
    (``boot_timeout``, ``sim_ports``, ``client`` ...).
    """

    def __init__(
        self, files: Sequence[str | Path] | None = None, base: str | None = None, **kwargs: Any
    ) -> None:
        self.files = list(files) if files is not None else None
        self.base = base
        self.kwargs = kwargs
        self._lock = threading.Lock()
        self._specs: list[ImageSpec] | None = None
        self._built: set[str] = set()
        self._runtimes: dict[str, DockerRuntime] = {}

    def __repr__(self) -> str:
        tags = [s.tag for s in self._specs] if self._specs else "unbuilt"
        return f"AutoDockerRuntime({tags})"

    def specs(self) -> list[ImageSpec]:
        """The images (specified on first call, not built; blocking)."""
        with self._lock:
            if self._specs is None:
                self._specs = image_specs(
                    self.files if self.files is not None else declared_files()
                )
            return self._specs

    def spec(self, file: str | None = None) -> ImageSpec:
        """The image serving the env module ``file`` (default: the first), built."""
        specs = self.specs()
        spec = next((s for s in specs if file is None or file in s.modules), None)
        if spec is None:
            known = sorted(m for s in specs for m in s.modules)
            raise PlacementError(
                f"expected {file} to be one of the images' env modules {known}, got none "
                "(it was declared after the images were specified); fix: import it from "
                "a conftest.py, or pass --hud-runtime=docker:IMAGE"
            )
        with self._lock:
            if spec.tag not in self._built:
                ensure_image(spec, self.kwargs.get("client"), self.base)
                self._built.add(spec.tag)
        return spec

    def runtime_for(self, path: str) -> DockerRuntime:
        """The DockerRuntime serving the env module at ``path`` (a file or a dotted name,
        as a row's ``module`` column gives it) in its image (blocking)."""
        file = _module_file(path)
        spec = self.spec(file)
        module = spec.modules[file]
        with self._lock:
            if module not in self._runtimes:
                kwargs = {"forward_env": True, "sim_ports": sim_ports(file), **self.kwargs}
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
