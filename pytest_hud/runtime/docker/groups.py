"""Which env modules can share one auto-built image: those whose requirements pip resolves
together (``--dry-run``, cached); clashing modules get one image each.
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
