"""The base image env images build FROM, found or made with nothing but the engine.

The default is the ecosystem's ``python:X.Y-slim`` (X.Y this host's minor version, since image
builds ``pip install --target`` on the host for it). Where the engine has it, or can pull it,
that is the base. Where no registry answers, :func:`build_host_base` makes
``pytest-hud-python:X.Y`` from the host's own interpreter (its stdlib, the shared libraries
``ldd`` lists, a shell), loaded with ``docker load`` from a tarball whose bytes, and so whose
image id, depend only on those files: rebuilt, it is the same image, so nothing built on it is
rebuilt. ``python -m pytest_hud image base`` does this by hand; :func:`ensure_base` does it on
first use, under the build lock, so xdist workers build it once.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_hud.errors import BaseImageError
from pytest_hud.runtime.docker.engine import LABEL, _sdk
from pytest_hud.runtime.docker.owners import owner_labels

__all__ = ["HostPython", "build_host_base", "ensure_base", "host_python"]

log = logging.getLogger(__name__)

#: How long a pull may take before the registry counts as not answering.
PULL_TIMEOUT = 300.0
#: Sonames manylinux wheels expect from the system (numpy's need libstdc++ and libgcc_s).
SYSTEM_LIBS = (
    "libstdc++.so.6",
    "libgcc_s.so.1",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libutil.so.1",
)
#: stdlib folders an evaluation never imports (and the host's installed packages)
_STDLIB_SKIP = frozenset(
    {
        "__pycache__",
        "test",
        "tests",
        "idlelib",
        "tkinter",
        "turtledemo",
        "ensurepip",
        "site-packages",
        "dist-packages",
    }
)
#: every file's mtime in the layer: a fixed one keeps the tarball's bytes a function of content
_MTIME = 1_000_000_000
_SMOKE = (
    "import ssl, asyncio, ctypes, sqlite3, json, hashlib, zlib, socket, subprocess; "
    "hashlib.sha256(b''); subprocess.run(['/bin/sh', '-c', 'true'], check=True)"
)

Say = Callable[[str], None]


def _version(version: tuple[int, int] | None = None) -> str:
    major, minor = version or sys.version_info[:2]
    return f"{major}.{minor}"


def slim_tag(version: tuple[int, int] | None = None) -> str:
    """The registry's base for a Python of ``version`` (default: this one)."""
    return f"python:{_version(version)}-slim"


def local_tag(version: tuple[int, int] | None = None) -> str:
    """The base built from the host's interpreter."""
    return f"pytest-hud-python:{_version(version)}"


def _present(client: Any, ref: str) -> bool:
    with contextlib.suppress(_sdk().errors.ImageNotFound):
        client.images.get(ref)
        return True
    return False


def pull(client: Any, ref: str, say: Say, timeout: float = PULL_TIMEOUT) -> str | None:
    """Pull ``ref``; None when it arrived, else why not (no registry, no such image, too
    slow). Progress goes to ``say`` about every 10 s."""
    docker = _sdk()
    repo, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "latest")
    deadline = time.monotonic() + timeout
    last = time.monotonic()
    stream: Any = None
    try:
        stream = client.api.pull(repo, tag=tag, stream=True, decode=True)
        for event in stream:
            if "error" in event:
                return str(event["error"]).strip()
            now = time.monotonic()
            if now > deadline:
                return f"the pull took over {timeout:.0f} s"
            if now - last > 10:
                say(f"pulling {ref}: {event.get('status', '')} {event.get('progress', '')}")
                last = now
    except (docker.errors.DockerException, OSError) as exc:
        return str(getattr(exc, "explanation", None) or exc).strip()
    finally:
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.close()
    return None if _present(client, ref) else f"the engine reported no image {ref} after the pull"


# -- the host's interpreter as an image -----------------------------------------------------
_PROBE = """
import json, os, sys, sysconfig
exe = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
stdlib = os.path.realpath(sysconfig.get_path("stdlib"))
dynload = next((os.path.realpath(p) for p in sys.path if p.endswith("lib-dynload")), "")
print(json.dumps({"version": list(sys.version_info[:2]), "exe": exe, "stdlib": stdlib,
                  "dynload": dynload, "platform": sys.platform}))
"""


@dataclass(frozen=True)
class HostPython:
    """Where an interpreter's files are (its venv resolved to the real one)."""

    version: tuple[int, int]
    exe: Path
    stdlib: Path
    dynload: Path | None


def host_python(python: str | os.PathLike[str] | None = None) -> HostPython:
    """Ask ``python`` (default: this interpreter) where its files are."""
    python = str(python or sys.executable)
    try:
        done = subprocess.run(
            [python, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True
        )
        info = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise BaseImageError(f"cannot ask {python} where its files are: {exc}") from None
    if info["platform"] != "linux":
        raise BaseImageError(
            f"{python} is a {info['platform']} interpreter: only a Linux host's can become a "
            "container's base; fix: let the engine pull python:X.Y-slim (docker pull), or pass "
            "--hud-docker-base=IMAGE"
        )
    dynload = Path(info["dynload"]) if info["dynload"] else None
    return HostPython(tuple(info["version"]), Path(info["exe"]), Path(info["stdlib"]), dynload)


def _ldd(paths: list[Path]) -> set[Path]:
    """The shared libraries ``ldd`` resolves for ``paths`` (the dynamic loader included)."""
    if shutil.which("ldd") is None:
        raise BaseImageError("ldd is not on PATH; it lists the interpreter's shared libraries")
    libs: set[Path] = set()
    for chunk in range(0, len(paths), 200):
        done = subprocess.run(
            ["ldd", *map(str, paths[chunk : chunk + 200])],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        for line in done.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[1] == "=>" and parts[2].startswith("/"):
                libs.add(Path(parts[2]))
            elif parts and parts[0].startswith("/") and "(" in line:
                libs.add(Path(parts[0]))
    return libs


def _system_lib(name: str, near: Path) -> Path | None:
    """``name`` beside libc, else in the usual library folders."""
    folders = [near, *map(Path, ("/usr/lib64", "/lib64", "/usr/lib", "/lib"))]
    return next((folder / name for folder in folders if (folder / name).exists()), None)


class _Layer:
    """A root filesystem written as one tar whose bytes depend only on what is added."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[str, Any]] = {}  # path -> (kind, payload)

    def directory(self, path: str, mode: int = 0o755) -> None:
        parts = Path(path.strip("/")).parts
        for n in range(1, len(parts) + 1):
            key = "/".join(parts[:n])
            self.entries.setdefault(key, ("dir", mode if n == len(parts) else 0o755))

    def _parent(self, key: str) -> None:
        if "/" in key:
            self.directory(key.rsplit("/", 1)[0])

    def file(self, path: str, source: Path | bytes, mode: int | None = None) -> None:
        key = path.strip("/")
        self._parent(key)
        if mode is None:
            mode = source.stat().st_mode & 0o7777 if isinstance(source, Path) else 0o644
        self.entries[key] = ("file", (source, mode))

    def symlink(self, path: str, target: str) -> None:
        key = path.strip("/")
        self._parent(key)
        self.entries[key] = ("link", target)

    def write(self, out: io.BufferedIOBase) -> None:
        with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for key in sorted(self.entries):
                kind, payload = self.entries[key]
                info = tarfile.TarInfo(key)
                info.mtime, info.uid, info.gid, info.uname, info.gname = _MTIME, 0, 0, "", ""
                if kind == "dir":
                    info.type, info.mode = tarfile.DIRTYPE, payload
                    tar.addfile(info)
                elif kind == "link":
                    info.type, info.linkname, info.mode = tarfile.SYMTYPE, payload, 0o777
                    tar.addfile(info)
                else:
                    source, info.mode = payload
                    data = source.read_bytes() if isinstance(source, Path) else source
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))


def _stdlib_files(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _STDLIB_SKIP and not d.startswith("config-"))
        for name in sorted(files):
            if not name.endswith((".pyc", ".pyo")):
                yield Path(folder) / name


def _compiled(py: HostPython, files: list[Path], into: Path) -> dict[Path, Path]:
    """Bytecode for the stdlib's ``.py`` files, made by the interpreter itself in ``into``
    (``unchecked-hash``: valid whatever the files' mtimes, and the same bytes each time), so
    containers import the stdlib without compiling it: source path -> pyc path."""
    sources = [f for f in files if f.suffix == ".py"]
    mirror = into / "src"
    for src in sources:
        dest = mirror / src.relative_to(py.stdlib)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    subprocess.run(
        [
            str(py.exe),
            "-I",
            "-m",
            "compileall",
            "-q",
            "-j0",
            "--invalidation-mode",
            "unchecked-hash",
            "-s",
            str(mirror),
            "-p",
            str(py.stdlib),
            str(mirror),
        ],
        capture_output=True,
        timeout=600,
        check=False,
    )
    tag = sys.implementation.cache_tag if py.version == sys.version_info[:2] else None
    out: dict[Path, Path] = {}
    for src in sources:
        rel = src.relative_to(py.stdlib)
        cache = mirror / rel.parent / "__pycache__"
        hits = sorted(cache.glob(f"{rel.stem}.{tag or '*'}.pyc")) if cache.is_dir() else []
        plain = [h for h in hits if h.name.count(".") == 2]  # not .opt-1 / .opt-2
        if plain:
            out[src] = plain[0]
    return out


def _rootfs(py: HostPython, workdir: Path) -> _Layer:
    layer = _Layer()
    layer.file(str(py.exe), py.exe, 0o755)
    for name in ("python3", "python"):
        if name != py.exe.name:
            layer.symlink(str(py.exe.parent / name), py.exe.name)
        if py.exe != Path("/usr/local/bin") / name:
            layer.symlink(f"usr/local/bin/{name}", str(py.exe))
    files = list(_stdlib_files(py.stdlib))
    if py.dynload is not None and not py.dynload.is_relative_to(py.stdlib):
        files += list(_stdlib_files(py.dynload))
    for path in files:
        if path.is_symlink():
            target = path.resolve()
            if target.is_relative_to(py.stdlib) and target.exists():
                layer.symlink(str(path), os.readlink(path))
                continue
            if not target.exists():
                continue
            path_source = target  # a link out of the stdlib (Debian's sitecustomize): its file
        else:
            path_source = path
        layer.file(str(path), path_source)
    for src, pyc in _compiled(py, files, workdir).items():
        layer.file(str(pyc_path(src, pyc)), pyc, 0o644)
    binaries = [py.exe, *(p for p in files if p.suffix == ".so")]
    sh = shutil.which("dash") or shutil.which("sh")
    if sh is not None:
        binaries.append(Path(sh).resolve())
        layer.file("bin/sh", Path(sh).resolve(), 0o755)
    libs = _ldd(binaries)
    libc = next((lib for lib in libs if lib.name == "libc.so.6"), None)
    if libc is None:
        raise BaseImageError(f"ldd found no libc.so.6 for {py.exe}: not a glibc Linux build")
    for name in SYSTEM_LIBS:
        found = _system_lib(name, libc.parent)
        if found is not None:
            libs.add(found)
    for lib in sorted(libs):
        layer.file(str(lib), lib.resolve(), 0o755)
    layer.directory("tmp", 0o1777)
    layer.directory("root", 0o700)
    layer.file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n")
    layer.file("etc/group", b"root:x:0:\nnogroup:x:65534:\n")
    certs = Path("/etc/ssl/certs/ca-certificates.crt")
    if certs.exists():
        layer.file(str(certs), certs.resolve(), 0o644)
    return layer


def pyc_path(source: Path, pyc: Path) -> Path:
    """Where ``source``'s bytecode ``pyc`` goes in the image: its own ``__pycache__``."""
    return source.parent / "__pycache__" / pyc.name


def _image_archive(layer_tar: Path, out: Path, tag: str, created: str) -> str:
    """A ``docker load`` archive of one layer; the image id it will have."""
    digest = hashlib.sha256()
    with open(layer_tar, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    diff_id = f"sha256:{digest.hexdigest()}"
    config = {
        "architecture": "amd64" if os.uname().machine == "x86_64" else os.uname().machine,
        "os": "linux",
        "created": created,
        "config": {
            "Env": [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "LANG=C.UTF-8",
            ],
            "Cmd": ["python3"],
            "Labels": {f"{LABEL}.base": "host"},
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": created, "created_by": "python -m pytest_hud image base"}],
    }
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    image_id = hashlib.sha256(config_bytes).hexdigest()
    manifest = [{"Config": f"{image_id}.json", "RepoTags": [tag], "Layers": ["layer/layer.tar"]}]
    with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in (
            (f"{image_id}.json", config_bytes),
            ("manifest.json", json.dumps(manifest).encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), _MTIME
            tar.addfile(info, io.BytesIO(data))
        tar.add(layer_tar, "layer/layer.tar")
    return f"sha256:{image_id}"


def build_host_base(
    client: Any,
    tag: str | None = None,
    *,
    python: str | os.PathLike[str] | None = None,
    say: Say = log.info,
) -> str:
    """Make ``tag`` (default ``pytest-hud-python:X.Y``) from ``python``'s own files, with no
    registry, and smoke-test it; the tag. The same interpreter gives the same image id."""
    docker = _sdk()
    start = time.monotonic()
    py = host_python(python)
    tag = tag or local_tag(py.version)
    say(f"building the base image {tag} from {py.exe} (no registry needed; once per engine)")
    with tempfile.TemporaryDirectory(prefix="pytest-hud-base.") as tmp:
        layer = _rootfs(py, Path(tmp))
        layer_tar = Path(tmp) / "layer.tar"
        with open(layer_tar, "wb") as out:
            layer.write(out)
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(py.exe.stat().st_mtime)))
        archive = Path(tmp) / "image.tar"
        image_id = _image_archive(layer_tar, archive, tag, created)
        with open(archive, "rb") as handle:
            client.images.load(handle)
    try:
        client.containers.run(
            tag, ["python3", "-c", _SMOKE], remove=True, stderr=True, labels=owner_labels()
        )
    except docker.errors.ContainerError as exc:
        with contextlib.suppress(docker.errors.APIError):
            client.images.remove(tag, force=True)
        err = exc.stderr.decode(errors="replace") if exc.stderr else str(exc)
        raise BaseImageError(
            f"the base image built from {py.exe} failed its smoke test (removed); fix: let the "
            f"engine pull {slim_tag(py.version)} or pass --hud-docker-base=IMAGE:\n{err}"
        ) from None
    size = client.images.get(tag).attrs.get("Size", 0) / 1e6
    say(f"built {tag} ({size:.0f} MB, {image_id[:19]}) in {time.monotonic() - start:.1f} s")
    return tag


def ensure_base(client: object, requested: str | None = None, say: Say = log.warning) -> str:
    """The base to build FROM, on the engine: ``requested`` (pulled if missing), else
    ``python:X.Y-slim`` if present or pullable, else ``pytest-hud-python:X.Y``, built from
    this interpreter if missing. Callers hold the build lock (:mod:`.image`)."""
    slim, local = slim_tag(), local_tag()
    present = next(
        (r for r in ([requested] if requested else [slim, local]) if _present(client, r)), None
    )
    if present is not None:
        return present
    wanted = requested or slim
    say(f"pulling the base image {wanted}")
    why = pull(client, wanted, say)
    if why is None:
        return wanted
    if requested:
        raise BaseImageError(
            f"base image {requested!r} is not on this Docker engine and pulling it failed "
            f"({why}); fix: docker pull {requested} where a registry answers, or drop "
            "--hud-docker-base to use python:X.Y-slim or a base built from this host's Python "
            "(python -m pytest_hud image base)"
        )
    say(f"no registry gave {slim} ({why})")
    return build_host_base(client, local, say=say)
