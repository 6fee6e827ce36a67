"""``build_image``: an env image without a registry, dependencies installed on the host into a
keyed deps image so a source edit rebuilds only the small top image.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_hud.runtime.docker.apt import apt_rootfs
from pytest_hud.runtime.docker.base import ensure_base
from pytest_hud.runtime.docker.engine import (
    LABEL,
    MODULE_ENV,
    RUNTIME_DEPS,
    _client,
    _sdk,
)
from pytest_hud.runtime.docker.owners import owner_labels

__all__ = ["build_image", "build_lock", "cache_dir"]

log = logging.getLogger(__name__)


# -- building an image without a registry ---------------------------------------------------
def cache_dir() -> Path:
    """$PYTEST_HUD_CACHE, else $XDG_CACHE_HOME/pytest-hud, else ~/.cache/pytest-hud."""
    if os.environ.get("PYTEST_HUD_CACHE"):
        return Path(os.environ["PYTEST_HUD_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pytest-hud"


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_lock() -> contextlib.AbstractContextManager[None]:
    """One image build (or base build) at a time on this host: xdist workers and a
    ``python -m pytest_hud image`` command wait for each other."""
    return _file_lock(cache_dir() / "build.lock")


def _skip(path: Path) -> bool:
    return "__pycache__" in path.parts or path.suffix == ".pyc"


def _files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob("*") if p.is_file() and not _skip(p.relative_to(root)))


def _hash_tree(digest: Any, root: Path, name: str) -> None:
    for path in _files(root):
        rel = path.name if root.is_file() else path.relative_to(root).as_posix()
        digest.update(f"{name}/{rel}\0{os.access(path, os.X_OK)}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())


def _project() -> tuple[Path, list[Path]]:
    """Where this project's source is, and the files pip needs to build it.

    A source checkout (editable install): its pyproject and package. An installed
    copy: just the package folder (copied as is).
    """
    package = Path(__file__).resolve().parents[2]  # pytest_hud/
    root = package.parent
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and 'name = "pytest-hud"' in pyproject.read_text():
        extra = [p for p in root.iterdir() if p.name in ("README.md", "setup.cfg", "setup.py")]
        extra += [p for p in root.iterdir() if p.name.startswith("LICENSE")]
        return root, [pyproject, package, *sorted(extra)]
    return package.parent, [package]


def _requirements(packages: Sequence[str] | None) -> list[str]:
    """The runtime deps pinned to this environment's versions, plus ``packages``."""
    reqs = []
    for name in RUNTIME_DEPS:
        try:
            reqs.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            reqs.append(name)
    return reqs + [str(p) for p in packages or ()]


def _culprits(reqs: Sequence[str], log_text: str) -> list[str]:
    """The requirements pip's log blames: its "No matching distribution found for X" or
    "the requirement X", else those its ERROR lines name, else all of them."""
    named = re.findall(r"(?:found for|satisfies the requirement) (\S+)", log_text)
    if named:
        return sorted(set(named))
    errors = "\n".join(ln for ln in log_text.splitlines() if "error" in ln.lower()).lower()
    hits = [r for r in reqs if re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() in errors]
    return hits or list(reqs)


def _pip(args: list[str], what: str, reqs: Sequence[str] = ()) -> None:
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    proc = subprocess.run(cmd + args, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        text = proc.stdout + proc.stderr
        out = text.strip().splitlines()
        which = f" (failed on {', '.join(_culprits(reqs, text))})" if reqs else ""
        raise RuntimeError(
            f"pip install of {what} failed{which}; fix the requirement (an Environment's "
            "requires=[...]); the log's tail:\n" + "\n".join(out[-30:])
        )


def _deps_folder(reqs: list[str]) -> Path:
    """A ``pip install --target`` folder of ``reqs``, cached by the requirement set until
    the deps image built from it exists."""
    key_data = [f"{sys.version_info[0]}.{sys.version_info[1]}", platform.machine(), sorted(reqs)]
    key = hashlib.sha256(json.dumps(key_data).encode()).hexdigest()[:16]
    folder = cache_dir() / "site" / key
    if (folder / ".complete").exists():
        log.info("pip: cache hit for %d requirement(s) (%s)", len(reqs), folder)
        return folder
    log.info("pip: cache miss; installing %s", " ".join(reqs))
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=folder.parent))
    try:
        _pip(["--target", str(tmp), *reqs], "the image's dependencies", reqs)
        (tmp / "requirements.txt").write_text("\n".join(reqs) + "\n")
        (tmp / ".complete").write_text("")
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _install_project(root: Path, parts: list[Path], site: Path) -> None:
    if not (root / "pyproject.toml").is_file():
        shutil.copytree(root / "pytest_hud", site / "pytest_hud", ignore=_ignore_caches)
        _copy_metadata(site)
        return
    with tempfile.TemporaryDirectory(prefix="pytest-hud-src.") as src:
        for part in parts:  # a copy, so the build never writes into the checkout
            if part.is_dir():
                shutil.copytree(part, Path(src) / part.name, ignore=_ignore_caches)
            else:
                shutil.copy2(part, Path(src) / part.name)
        _pip(["--target", str(site), "--no-deps", src], "pytest-hud")


def _copy_metadata(site: Path) -> None:
    """An installed pytest-hud's dist-info beside its copy: the entry points (sim kinds, agent
    kinds) are found in the image as on the host."""
    from importlib import metadata

    try:
        dist = metadata.distribution("pytest-hud")
    except metadata.PackageNotFoundError:  # a bare source tree: nothing registered to copy
        return
    info = next((f for f in dist.files or [] if f.name == "entry_points.txt"), None)
    if info is not None:
        folder = Path(str(dist.locate_file(info))).parent
        shutil.copytree(folder, site / folder.name, ignore=_ignore_caches, dirs_exist_ok=True)


def _ignore_caches(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if n == "__pycache__" or n.endswith(".pyc")]


def _extra(extra_files: Any) -> list[tuple[str, Path]]:
    """``[path, ...]`` (each to /app/<its name>) or ``{dest: path}`` (to /app/<dest>)."""
    if not extra_files:
        return []
    if isinstance(extra_files, str | Path):
        extra_files = [extra_files]
    items = (
        list(extra_files.items())
        if isinstance(extra_files, Mapping)
        else [(Path(p).name, p) for p in extra_files]
    )
    out = []
    for dest, src in items:
        path = Path(src).resolve()
        if not path.exists():
            raise FileNotFoundError(f"build_image: extra file {src} does not exist")
        dest = str(dest).strip("/")
        if not dest or ".." in Path(dest).parts:
            raise ValueError(f"build_image: bad destination {dest!r} for {src}")
        out.append((dest, path))
    return out


def _deps_tag(base_id: str, reqs: list[str], apt: list[str]) -> str:
    key = json.dumps([base_id, sorted(reqs), apt, sys.version_info[:2]]).encode()
    return f"pytest-hud-deps:{hashlib.sha256(key).hexdigest()[:16]}"


def _deps_image(client: Any, base: str, tag: str, reqs: list[str], apt: list[str]) -> None:
    """The base plus the pip folder (and apt root filesystem), as its own image.

    Why a layer image: the dependencies are hundreds of MB and slow to send and commit,
    and change rarely, while the project
    and env modules change often; the final image builds FROM this one with a context
    of a few MB, so editing a module rebuilds in seconds.
    """
    with contextlib.suppress(_sdk().errors.ImageNotFound):
        client.images.get(tag)
        log.info("deps layer: cache hit (%s)", tag)
        return
    deps = _deps_folder(reqs)
    rootfs = apt_rootfs(apt, cache_dir(), log.info) if apt else None
    lines = [f"FROM {base}", *(["COPY rootfs /"] if rootfs else []), "COPY deps /opt/site"]
    with tempfile.TemporaryDirectory(prefix="pytest-hud-deps.") as tmp:
        context = Path(tmp) / "context.tar"
        (Path(tmp) / "Dockerfile").write_text("\n".join(lines) + "\n")
        with tarfile.open(context, "w") as tar:
            tar.add(Path(tmp) / "Dockerfile", "Dockerfile", filter=_tar_filter)
            if rootfs is not None:
                _add_tree(tar, rootfs, "rootfs", keep_caches=True)
            _add_tree(tar, deps, "deps", keep_caches=True)
        log.info("deps layer: building %s (context %.0f MB)", tag, context.stat().st_size / 1e6)
        with open(context, "rb") as fileobj:
            _build(client, tag, {f"{LABEL}.deps": "1"}, fileobj=fileobj, custom_context=True)
    # The engine holds the layer now; the host's copy (often GBs) was only its input, and
    # a disk shared with the venvs and the engine is what runs out first.
    shutil.rmtree(deps, ignore_errors=True)


def _dockerfile(base: str, module: str | None) -> str:
    lines = [
        f"FROM {base}",
        "COPY site /opt/site",
        "COPY app /app",
        "ENV PYTHONPATH=/opt/site:/app PYTHONUNBUFFERED=1",
        "WORKDIR /app",
    ]
    if module:
        lines.append(f"ENV {MODULE_ENV}={json.dumps(str(module))}")
    return "\n".join(lines) + "\n"


def _tar_filter(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _add_tree(tar: tarfile.TarFile, src: Path, arcname: str, *, keep_caches: bool) -> None:
    if src.is_file():
        tar.add(src, arcname, filter=_tar_filter)
        return
    tar.add(src, arcname, recursive=False, filter=_tar_filter)
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if not keep_caches and _skip(rel):
            continue
        tar.add(path, f"{arcname}/{rel.as_posix()}", recursive=False, filter=_tar_filter)


def _build(client: Any, tag: str, labels: dict[str, str], **kwargs: object) -> Any:
    docker = _sdk()
    try:
        image, _ = client.images.build(tag=tag, rm=True, forcerm=True, labels=labels, **kwargs)
    except docker.errors.BuildError as exc:
        out = "".join(str(c.get("stream") or c.get("error") or "") for c in exc.build_log)
        tail = "\n".join(out.strip().splitlines()[-30:])
        raise RuntimeError(f"docker build of {tag} failed: {exc.msg}\n{tail}") from None
    return image


_SMOKE = (
    "import sys; v = '%d.%d' % sys.version_info[:2]; "
    "assert v == {want!r}, 'the image runs Python ' + v + ' but its packages were installed "
    "for {want} (pick a base image with Python {want})'; "
    "import pytest_hud.serve, numpy, gymnasium, msgpack, websockets"
)


def build_image(
    tag: str,
    *,
    base: str | None = None,
    module: str | None = None,
    extra_files: object = None,
    packages: Sequence[str] | None = None,
    dockerfile: str | Path | None = None,
    client: Any = None,
    apt: Sequence[str] = (),
    labels: Mapping[str, str] | None = None,
) -> str:
    """Build ``tag``: ``base`` plus this project, its runtime deps and ``packages``; the tag.

    No registry is needed: packages are installed on this host with ``pip install
    --target`` (this interpreter's pip, so the base image needs the same Python minor
    version) and copied in. ``base`` defaults to ``python:X.Y-slim`` where the engine has or
    can pull it, else a base made from this host's Python (:mod:`.base`). ``extra_files``
    (paths, or ``{dest: path}``) land in /app, the working directory; ``module`` (e.g.
    ``envs/pendulum.py``) becomes ``$PYTEST_HUD_MODULE``. Nothing is rebuilt while the tag
    carries the same content hash; the dependency folder is cached under :func:`cache_dir`
    by requirement set. ``dockerfile``: build that file instead (its folder is the
    context). ``apt``: Debian packages unpacked on the host (:mod:`.apt`) and copied to
    ``/``. ``labels``: extra image labels. Progress goes to this module's logger at INFO.
    """
    docker = _sdk()
    client = _client(client)
    if dockerfile is not None:
        path = Path(dockerfile).resolve()
        labels = {f"{LABEL}.module": str(module)} if module else {}
        _build(client, tag, labels, path=str(path.parent), dockerfile=path.name)
        return tag
    with build_lock():
        base = ensure_base(client, base)
        base_id = client.images.get(base).id
        reqs = _requirements(packages)
        root, parts = _project()
        extra = _extra(extra_files)
        apt_list = sorted(set(apt))
        deps_tag = _deps_tag(base_id, reqs, apt_list)
        text = _dockerfile(deps_tag, module)
        digest = hashlib.sha256()
        digest.update(json.dumps([text, base_id, reqs, apt_list, sys.version_info[:2]]).encode())
        for part in parts:
            _hash_tree(digest, part, f"project/{part.name}")
        for dest, src in extra:
            _hash_tree(digest, src, f"app/{dest}")
        content = digest.hexdigest()[:32]
        try:
            old = client.images.get(tag)
        except docker.errors.ImageNotFound:
            old = None
        if old is not None and (old.labels or {}).get(f"{LABEL}.content") == content:
            log.info("cache hit: %s is up to date", tag)
            return tag
        log.info("cache miss: building %s", tag)
        start = time.monotonic()
        _deps_image(client, base, deps_tag, reqs, apt_list)
        with tempfile.TemporaryDirectory(prefix="pytest-hud-build.") as tmp:
            site = Path(tmp) / "site"
            _install_project(root, parts, site)
            app = Path(tmp) / "app"
            app.mkdir()
            (Path(tmp) / "Dockerfile").write_text(text)
            context = Path(tmp) / "context.tar"
            with tarfile.open(context, "w") as tar:
                tar.add(Path(tmp) / "Dockerfile", "Dockerfile", filter=_tar_filter)
                _add_tree(tar, site, "site", keep_caches=True)
                _add_tree(tar, app, "app", keep_caches=False)
                for dest, src in extra:
                    _add_tree(tar, src, f"app/{dest}", keep_caches=False)
            log.info("docker build of %s (context %.0f MB)", tag, context.stat().st_size / 1e6)
            with open(context, "rb") as fileobj:
                all_labels = {**(labels or {}), f"{LABEL}.content": content}
                image = _build(client, tag, all_labels, fileobj=fileobj, custom_context=True)
        log.info("smoke test of %s", tag)
        want = f"{sys.version_info[0]}.{sys.version_info[1]}"
        try:
            client.containers.run(
                tag,
                ["python3", "-c", _SMOKE.format(want=want)],
                remove=True,
                stderr=True,
                labels=owner_labels(),
            )
        except docker.errors.ContainerError as exc:
            with contextlib.suppress(docker.errors.APIError):
                client.images.remove(image.id, force=True)
            err = exc.stderr.decode(errors="replace") if exc.stderr else str(exc)
            raise RuntimeError(f"{tag} was built but cannot import pytest-hud:\n{err}") from None
        if old is not None and old.id != image.id:
            with contextlib.suppress(docker.errors.APIError):  # still in use: leave it
                client.images.remove(old.id)
        log.info("built %s in %.1fs", tag, time.monotonic() - start)
        return tag
