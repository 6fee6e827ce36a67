"""A run's provenance (versions, git revision, host, checkpoint hash, image digest, replay
command). Every probe is bounded and records ``None`` for a missing piece.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Required, TypedDict

from pytest_hud.plumbing.auth import redact

__all__ = [
    "CORE_PACKAGES",
    "CheckpointRef",
    "GitRevision",
    "Host",
    "ImageRef",
    "Provenance",
    "checkpoint_hash",
    "collect",
    "git_revision",
    "host",
    "package_versions",
    "repro_command",
]

CORE_PACKAGES = ("pytest-hud", "lerobot", "torch", "gymnasium", "numpy")
_CHUNK = 1 << 20
#: per-file sha256 keyed by (absolute path, mtime_ns, size): re-hashing a 1 GB
#: checkpoint costs seconds, a stat costs microseconds
_FILE_HASHES: dict[tuple[str, int, int], str] = {}


class GitRevision(TypedDict):
    commit: str
    dirty: bool | None  # None: git did not say


class Host(TypedDict):
    hostname: str
    platform: str
    machine: str
    python: str
    implementation: str
    cpus: int | None


class CheckpointRef(TypedDict):
    """A checkpoint as provenance and ledgers name it: where it was and its content hash."""

    path: str | None
    hash: str | None


class ImageRef(TypedDict):
    name: str
    digest: str | None


class Provenance(TypedDict, total=False):
    """A run's provenance (:func:`collect`), JSON-able: the ledger's run record and the
    results JSON carry it. The plugin adds the agent (and a paired session's arms and
    their order's seed) and the Python version."""

    packages: Required[dict[str, str | None]]
    git: Required[GitRevision | None]
    host: Required[Host]
    checkpoint: Required[CheckpointRef | None]
    image: Required[ImageRef | None]
    seed: Required[int | None]
    command: Required[str | None]
    agent: str
    agents: list[str]
    ab_seed: int | None
    python: str


def package_versions(extra: Iterable[str] = ()) -> dict[str, str | None]:
    """Installed versions of pytest-hud's core packages and ``extra`` (e.g. the env's
    packages); ``None`` for one that is not installed."""
    out: dict[str, str | None] = {}
    for name in (*CORE_PACKAGES, *extra):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_revision(folder: str | Path, timeout: float = 5.0) -> GitRevision | None:
    """``{"commit": sha, "dirty": bool}`` for the repository holding ``folder``; ``None``
    outside git, without git, or when git does not answer within ``timeout`` s."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(folder), *args],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None

    head = git("rev-parse", "HEAD")
    if head is None:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": head.strip(), "dirty": None if status is None else bool(status.strip())}


def host() -> Host:
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "cpus": os.cpu_count(),
    }


def _file_hash(path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    cached = _FILE_HASHES.get(key)
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    _FILE_HASHES[key] = digest.hexdigest()
    return _FILE_HASHES[key]


def checkpoint_hash(path: str | Path) -> str:
    """``sha256:<hex>`` of a checkpoint's content: a file's bytes, or for a folder every
    file below it (symlinks followed, hidden files included) as ``relative path NUL
    file sha256`` lines in sorted order, so renaming or editing any file changes it and
    the folder's location does not. Streams in 1 MiB chunks; files unchanged since the
    last call (same path, mtime and size) are not re-read."""
    root = Path(path)
    if root.is_file():
        return f"sha256:{_file_hash(root)}"
    if not root.is_dir():
        raise FileNotFoundError(
            f"checkpoint {root}: expected a file or folder, got nothing there; "
            "fix: pass the checkpoint's path"
        )
    files = sorted(p for p in root.rglob("*") if p.is_file())
    digest = hashlib.sha256()
    for f in files:
        rel = f.relative_to(root).as_posix()
        digest.update(f"{rel}\0{_file_hash(f)}\n".encode())
    return f"sha256:{digest.hexdigest()}"


def repro_command(
    nodeid: str,
    agent: str | None,
    base_seed: int | None = None,
    *,
    checkpoint: str | None = None,
    runtime: str | None = None,
    extra: Sequence[str] = (),
) -> str:
    """The pytest command that replays one episode: its node id (which carries the repeat
    index) with the run's agent and ``--hud-seed`` (each case's seed derives from it,
    the row and the repeat, see ``pytest_hud._plugin.cases.derive_seed``). A secret in a
    url (``?token=``) is left out: the replay finds it where the run did."""
    args = ["pytest", nodeid]
    if agent is not None:
        args.append(f"--hud-agent={agent}")
    if base_seed is not None:
        args.append(f"--hud-seed={base_seed}")
    if checkpoint is not None:
        args.append(f"--hud-checkpoint={checkpoint}")
    if runtime is not None:
        args.append(f"--hud-runtime={runtime}")
    args.extend(extra)
    return shlex.join(redact(arg) for arg in args)


def collect(
    *,
    suite: str | Path | None = None,
    env_packages: Iterable[str] = (),
    checkpoint: str | Path | None = None,
    image: str | None = None,
    image_digest: str | None = None,
    seed: int | None = None,
    command: Sequence[str] | None = None,
) -> Provenance:
    """The run's provenance, JSON-able: computed once per session on the controller. The
    command is recorded without the secrets its urls may carry (``?token=``)."""
    return {
        "packages": package_versions(env_packages),
        "git": git_revision(suite) if suite is not None else None,
        "host": host(),
        "checkpoint": None
        if checkpoint is None
        else {"path": str(checkpoint), "hash": checkpoint_hash(checkpoint)},
        "image": None if image is None else {"name": image, "digest": image_digest},
        "seed": seed,
        "command": None if command is None else shlex.join(redact(arg) for arg in command),
    }
