"""Debian packages for a base image without apt: downloaded and unpacked on the host into a root
folder the image COPYs (maintainer scripts do not run), cached by package list.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_hud.errors import SubstrateError

__all__ = ["BASE_PROVIDED", "AptError", "apt_closure", "apt_rootfs"]

#: packages the base image already carries (copied from the host with the interpreter)
BASE_PROVIDED = frozenset({"libc6", "libgcc-s1", "gcc-12-base", "libstdc++6"})
_TIMEOUT = 900.0
_JUNK = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/lintian", "usr/share/bug")


class AptError(SubstrateError):
    """A Debian package could not be resolved, downloaded or unpacked."""


def _run(cmd: list[str], what: str, cwd: Path | None = None) -> str:
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, cwd=cwd, timeout=_TIMEOUT, check=False
        )
    except FileNotFoundError:
        raise AptError(
            f"{what}: expected {cmd[0]} on this host (a Debian/Ubuntu host), got none; "
            "fix: build the image on a Debian host, or drop apt=[...] and use a base "
            "image that has the libraries"
        ) from None
    except subprocess.TimeoutExpired:
        raise AptError(f"{what}: {cmd[0]} did not finish within {_TIMEOUT:.0f} s") from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise AptError(f"{what} failed (exit {proc.returncode}); the log's tail:\n{tail}")
    return proc.stdout


def apt_closure(packages: Sequence[str]) -> list[str]:
    """``packages`` and their recursive Depends, minus :data:`BASE_PROVIDED`, sorted."""
    for name in packages:  # a clear error naming the bad package, not apt's
        out = subprocess.run(
            ["apt-cache", "show", "--no-all-versions", name],
            capture_output=True,
            text=True,
            timeout=_TIMEOUT,
            check=False,
        )
        if out.returncode != 0 or not out.stdout.strip():
            raise AptError(
                f"apt package {name!r}: expected a package apt knows, got none "
                f"({(out.stderr.strip() or 'no such package').splitlines()[-1]}); fix the "
                "name in the Environment's apt=[...] (or run apt-get update on the host)"
            )
    cmd = ["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests"]
    cmd += ["--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"]
    text = _run(cmd + list(packages), f"resolving the apt packages {list(packages)}")
    names = {line.strip() for line in text.splitlines() if line and not line[0].isspace()}
    return sorted(n for n in names if not n.startswith("<") and n not in BASE_PROVIDED)


def apt_rootfs(
    packages: Sequence[str], cache: Path, say: Callable[[str], None] = lambda _: None
) -> Path:
    """A folder holding ``packages`` (and their closure) unpacked, cached by package set."""
    wanted = sorted(set(packages))
    key = hashlib.sha256(json.dumps(wanted).encode()).hexdigest()[:16]
    folder = cache / "apt" / key
    if (folder / ".complete").exists():
        say(f"apt: cache hit for {len(wanted)} package(s) ({folder})")
        return folder / "root"
    closure = apt_closure(wanted)
    say(f"apt: cache miss; downloading {len(closure)} package(s) (closure of {wanted})")
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=folder.parent))
    try:
        debs = tmp / "debs"
        root = tmp / "root"
        debs.mkdir()
        root.mkdir()
        _run(["apt-get", "download", *closure], f"apt-get download of {wanted}", cwd=debs)
        for deb in sorted(debs.glob("*.deb")):
            _run(["dpkg-deb", "-x", str(deb), str(root)], f"unpacking {deb.name}")
        shutil.rmtree(debs)
        for junk in _JUNK:  # documentation, never read inside an image
            shutil.rmtree(root / junk, ignore_errors=True)
        (tmp / ".complete").write_text("\n".join(closure) + "\n")
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    say(f"apt: unpacked {len(closure)} package(s) into {folder}")
    return folder / "root"
