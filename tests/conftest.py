"""Shared fixtures for pytest-hud's own tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
REQUIRE_ALL = os.environ.get("PYTEST_HUD_REQUIRE_ALL") == "1"


def require(condition: object, what: str, how: str) -> None:
    """Skip when ``what`` is truly absent, but fail under PYTEST_HUD_REQUIRE_ALL=1 (CI)."""
    if condition:
        return
    message = f"{what} is not available; {how}"
    if REQUIRE_ALL:
        pytest.fail(f"PYTEST_HUD_REQUIRE_ALL=1 and {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- interop: the real HUD SDK in its own venv (scripts/setup --interop) -------------------
def find_hud_python() -> Path | None:
    """The HUD venv's python: $PYTEST_HUD_HUD_PYTHON, else .ci/venvs/hud, else /work/venvs/hud."""
    env = os.environ.get("PYTEST_HUD_HUD_PYTHON")  # when set, it is the only candidate
    candidates = (
        [Path(env)]
        if env
        else [ROOT / ".ci/venvs/hud/bin/python", Path("/work/venvs/hud/bin/python")]
    )
    return next((p for p in candidates if p.is_file() and os.access(p, os.X_OK)), None)


@pytest.fixture(scope="session")
def hud_python() -> Path:
    """Path to a python with ``hud[robot]==0.6.21``; skips (fails under REQUIRE_ALL) if absent."""
    python = find_hud_python()
    require(
        python,
        "a python with the HUD SDK (hud[robot]==0.6.21)",
        "run scripts/setup --interop, or point $PYTEST_HUD_HUD_PYTHON at one",
    )
    assert python is not None
    probe = subprocess.run(
        [python, "-P", "-c", "import hud.capabilities.robot, hud.environment.robot, openpi_client"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    require(
        probe.returncode == 0,
        f"the HUD SDK in {python} ({probe.stderr.strip().splitlines()[-1:]})",
        "re-create it with scripts/setup --interop (rm -rf .ci/venvs/hud first)",
    )
    return python


# -- interop: openpi-client in its own venv (scripts/setup --interop) ----------------------
def find_openpi_python() -> Path | None:
    """The openpi venv's python: $PYTEST_HUD_OPENPI_PYTHON, else .ci/venvs/openpi, else
    /work/venvs/openpi."""
    env = os.environ.get("PYTEST_HUD_OPENPI_PYTHON")  # when set, it is the only candidate
    candidates = (
        [Path(env)]
        if env
        else [ROOT / ".ci/venvs/openpi/bin/python", Path("/work/venvs/openpi/bin/python")]
    )
    return next((p for p in candidates if p.is_file() and os.access(p, os.X_OK)), None)


@pytest.fixture(scope="session")
def openpi_python() -> Path:
    """Path to a python with ``openpi-client``; skips (fails under REQUIRE_ALL) if absent."""
    python = find_openpi_python()
    require(
        python,
        "a python with openpi-client",
        "run scripts/setup --interop, or point $PYTEST_HUD_OPENPI_PYTHON at one",
    )
    assert python is not None
    probe = subprocess.run(
        [python, "-P", "-c", "import openpi_client.websocket_client_policy"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    require(
        probe.returncode == 0,
        f"openpi-client in {python} ({probe.stderr.strip().splitlines()[-1:]})",
        "re-create it with scripts/setup --interop (rm -rf .ci/venvs/openpi first)",
    )
    return python


# -- lerobot: torch + lerobot in the project venv (scripts/setup --lerobot) ----------------
def require_lerobot() -> None:
    """Skip (fail under REQUIRE_ALL) unless torch and lerobot are installed."""
    import importlib.util

    missing = [m for m in ("torch", "lerobot") if importlib.util.find_spec(m) is None]
    require(not missing, " and ".join(missing), "run scripts/setup --lerobot (.ci/install-lerobot)")


@pytest.fixture(scope="session")
def tiny_act_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random ACT checkpoint for PushT (one camera, 2-d state and action)."""
    require_lerobot()
    from lerobot_fixtures import make_tiny_act

    return make_tiny_act(tmp_path_factory.mktemp("tiny_act"))
