"""Which env modules can share one auto-built image: those whose requirements resolve together.

``--hud-runtime=docker`` puts every env module of a session in one image when it can
(``pendulum.py`` + ``pusht.py``). Some stacks cannot live together: MetaWorld 3.1.1
pins ``mujoco==3.3.0`` and the LIBERO suite ``mujoco==3.17.0`` (robosuite 1.4.0 needs
it), so ``pip`` says ``Cannot install metaworld==3.1.1 and mujoco==3.17.0``. A session
whose rows span both then gets one image per env module that declares requirements
(modules declaring none join the first), each built and cached as if it ran alone, so
the MetaWorld image of a mixed session is the one a MetaWorld-only session reuses.

Whether a set resolves is asked of pip itself (``pip install --dry-run``, metadata
only), only when two or more modules declare
requirements, and the verdict is cached under :func:`.image.cache_dir` by the
requirement set. A dry run that fails for another reason (an unknown package, no
network) counts as "resolves": the real build then fails with pip's message naming the
package, as a single-module session would.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["conflict", "image_groups"]

log = logging.getLogger(__name__)

_TIMEOUT = 600.0
#: what pip prints when requirements cannot be installed together
_CLASH = re.compile(r"ResolutionImpossible|conflicting dependencies|Cannot install ")


def conflict(reqs: Sequence[str], cache: Path) -> str | None:
    """pip's reason ``reqs`` cannot be installed together (one line), or None."""
    key = hashlib.sha256(json.dumps([sys.version_info[:2], sorted(reqs)]).encode()).hexdigest()
    verdict = cache / "resolve" / f"{key[:16]}.json"
    if verdict.is_file():
        return json.loads(verdict.read_text())["conflict"]  # type: ignore[no-any-return]
    with tempfile.TemporaryDirectory(prefix="pytest-hud-resolve.") as tmp:
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet"]
        cmd += ["--disable-pip-version-check", "--ignore-installed", "--target", tmp]
        try:
            proc = subprocess.run(
                cmd + list(reqs), capture_output=True, text=True, timeout=_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired:
            log.warning("pip could not resolve %s within %.0f s; assuming it can", reqs, _TIMEOUT)
            return None
    text = proc.stdout + proc.stderr
    found: str | None = None
    if proc.returncode != 0 and _CLASH.search(text):
        lines = [ln for ln in text.splitlines() if "Cannot install" in ln]
        found = (lines[0] if lines else "ResolutionImpossible").removeprefix("ERROR: ").strip()
    if proc.returncode == 0 or found:  # a network or typo failure is not cached
        verdict.parent.mkdir(parents=True, exist_ok=True)
        verdict.write_text(json.dumps({"requires": sorted(reqs), "conflict": found}))
    return found


def image_groups(
    requires: Mapping[str, Sequence[str]], base: Sequence[str], cache: Path
) -> tuple[list[list[str]], str | None]:
    """The env modules (keys of ``requires``: module -> its requirements) grouped into
    images, sorted, and pip's conflict line when they had to be split. ``base``: the
    requirements every image carries (pytest-hud's runtime deps, pinned)."""
    paths = sorted(requires)
    needy = [p for p in paths if requires[p]]
    if len(needy) < 2:
        return [paths], None
    union = list(base) + [r for p in needy for r in requires[p]]
    reason = conflict(list(dict.fromkeys(union)), cache)
    if reason is None:
        return [paths], None
    groups = [[p] for p in needy]
    groups[0] += [p for p in paths if not requires[p]]
    return [sorted(g) for g in groups], reason
