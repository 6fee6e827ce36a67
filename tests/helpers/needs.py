"""Skip where a dependency is truly absent, fail under PYTEST_HUD_REQUIRE_ALL=1 (CI)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from paths import ROOT

REQUIRE_ALL = os.environ.get("PYTEST_HUD_REQUIRE_ALL") == "1"


def require(condition: object, what: str, how: str) -> None:
    """Skip when ``what`` is truly absent, but fail under PYTEST_HUD_REQUIRE_ALL=1 (CI)."""
    if condition:
        return
    message = f"{what} is not available; {how}"
    if REQUIRE_ALL:
        pytest.fail(f"PYTEST_HUD_REQUIRE_ALL=1 and {message}", pytrace=False)
    pytest.skip(message)


# -- interop: third-party packages in their own venvs (scripts/setup --interop) -----------
def find_venv_python(name: str) -> Path | None:
    """``$PYTEST_HUD_<NAME>_PYTHON`` if set (then the only candidate), else .ci/venvs/<name>."""
    env = os.environ.get(f"PYTEST_HUD_{name.upper()}_PYTHON")
    path = Path(env) if env else ROOT / ".ci" / "venvs" / name / "bin" / "python"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def venv_python(name: str, what: str, probe_import: str, setup: str = "--interop") -> Path:
    """The venv's python after checking ``probe_import`` works there; skips (fails under
    PYTEST_HUD_REQUIRE_ALL) when it is absent or broken."""
    python = find_venv_python(name)
    require(
        python,
        f"a python with {what}",
        f"run scripts/setup {setup}, or point $PYTEST_HUD_{name.upper()}_PYTHON at one",
    )
    assert python is not None
    probe = subprocess.run(
        [python, "-P", "-c", f"import {probe_import}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    require(
        probe.returncode == 0,
        f"{what} in {python} ({probe.stderr.strip().splitlines()[-1:]})",
        f"re-create it with scripts/setup {setup} (rm -rf .ci/venvs/{name} first)",
    )
    return python


def find_hud_python() -> Path | None:
    return find_venv_python("hud")


# -- lerobot: torch + lerobot in the project venv (scripts/setup --lerobot) ------------------
def require_lerobot() -> None:
    """Skip (fail under REQUIRE_ALL) unless torch and lerobot are installed."""
    import importlib.util

    missing = [m for m in ("torch", "lerobot") if importlib.util.find_spec(m) is None]
    require(not missing, " and ".join(missing), "run scripts/setup --lerobot")
