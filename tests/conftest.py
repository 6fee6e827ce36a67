"""Shared fixtures for pytest-hud's own tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
REQUIRE_ALL = os.environ.get("PYTEST_HUD_REQUIRE_ALL") == "1"

# Several tests send SIGINT to a pytest (or Ray driver) subprocess and expect it to end.
# A shell without job control starts background commands (`.ci/run &`, nohup) with SIGINT
# ignored, children inherit the ignore across exec, and Python then never raises
# KeyboardInterrupt: those sessions ran to their bound (8 failures in a backgrounded CI
# run). Python's own handler here resets to the default in every child at exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The docker SDK (and requests under it) is imported here, before any test runs: pytester
# restores sys.modules after each test that uses it, and when docker was first imported
# later, half of requests' modules were dropped and re-imported while the other half kept
# the old ones (test_plugin.py then test_warm.py in one process: every docker call failed
# with "You can only merge into CookieJar").
with contextlib.suppress(ImportError):  # the docker tests say what is missing
    import docker  # noqa: F401


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


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The session's one real two-node Ray cluster on loopback (tests/ray_cluster.py)."""
    from ray_cluster import joined

    yield from joined(tmp_path_factory)


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


@pytest.fixture(scope="session")
def hud_python() -> Path:
    """A python with ``hud[robot]==0.6.21`` (its own venv: it pins numpy<2)."""
    return venv_python(
        "hud",
        "the HUD SDK (hud[robot]==0.6.21)",
        "hud.capabilities.robot, hud.environment.robot, openpi_client",
    )


@pytest.fixture(scope="session")
def openpi_python() -> Path:
    """A python with ``openpi-client`` (its own venv: it pins numpy<2)."""
    return venv_python("openpi", "openpi-client", "openpi_client.websocket_client_policy")


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
