"""Shared fixtures for pytest-hud's own tests."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _pytest.pytester as _pytester
import pytest
from needs import REQUIRE_ALL, require, require_lerobot, venv_python

pytest_plugins = ["pytester"]


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


def _installed(name: str) -> bool:
    """Whether module ``name`` comes from the interpreter's or a venv's libraries."""
    path = getattr(sys.modules.get(name), "__file__", None) or ""
    return path.startswith(_LIBRARIES)


_LIBRARIES = tuple({sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")})


class _KeepLibraries(_pytester.SysModulesSnapshot):
    """pytester's sys.modules snapshot, whose restore also keeps installed libraries
    imported meanwhile (it still drops the test's own modules). Dropped, a library is
    imported again by a later test, and some cannot be: torch ("function
    '_has_torch_function' already has a docstring"), numpy.fft ("cannot load module more
    than once per process"); a test using pytester then made a later LeRobot test fail
    (test_plugin_hooks.py then the record test in test_plugin.py in one process; the
    record test then the LIBERO pi05 test on the 3.12 stack)."""

    def __init__(self, preserve: Any = None) -> None:
        super().__init__(
            preserve=lambda name: _installed(name) or bool(preserve and preserve(name))
        )


_pytester.SysModulesSnapshot = _KeepLibraries  # type: ignore[misc]


def pytest_configure(config: pytest.Config) -> None:
    # CI (PYTEST_HUD_REQUIRE_ALL=1) prints the slowest tests (its budget is watched there)
    # and the reason of every skip (a stack where a case cannot apply, never a missing dep)
    if REQUIRE_ALL and not config.option.durations:
        config.option.durations = 30
    if REQUIRE_ALL and "s" not in (config.option.reportchars or ""):
        config.option.reportchars = (config.option.reportchars or "") + "s"  # say why


#: pytest plugins this venv's other packages bring that no child session of these tests
#: uses; each child loaded them again (hypothesis's summary hook alone imports all of
#: hypothesis): CPU each child spent on nothing (docs/performance.md, CI)
_UNUSED_IN_CHILDREN = ("hypothesispytest", "hydra_pytest", "jaxtyping", "typeguard")
LEAN_CHILDREN = " ".join(f"-p no:{name}" for name in _UNUSED_IN_CHILDREN)


def _lean(monkeypatch: pytest.MonkeyPatch) -> None:
    """Child pytest sessions of this test skip the unused plugins (PYTEST_ADDOPTS, which
    a test that wants a child's plain environment still clears or replaces)."""
    now = os.environ.get("PYTEST_ADDOPTS", "")
    if LEAN_CHILDREN not in now:
        monkeypatch.setenv("PYTEST_ADDOPTS", f"{now} {LEAN_CHILDREN}".strip())


@pytest.fixture(autouse=True)
def _lean_children(monkeypatch: pytest.MonkeyPatch) -> None:
    _lean(monkeypatch)


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest's pytester, whose child sessions skip the unused plugins too (pytester
    removes PYTEST_ADDOPTS when it starts)."""
    _lean(monkeypatch)
    return pytester


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Cluster:
    """The session's one real two-node Ray cluster on loopback (tests/helpers/ray_cluster.py),
    started for the first test that asks and stopped after the last of a run of such tests
    (``pytest_runtest_teardown``): idle, its daemons would use CPU for the rest of the
    session, which on 2 cores is time every later test waits for."""

    def __init__(self) -> None:
        self._running: Iterator[Any] | None = None
        self._value: Any = None

    def get(self, tmp_path_factory: pytest.TempPathFactory) -> Any:
        if self._running is None:
            from ray_cluster import joined

            running = joined(tmp_path_factory)
            self._value = next(running)  # a failed start has run joined's clean-up
            self._running = running
        return self._value

    def stop(self) -> None:
        running, self._running, self._value = self._running, None, None
        if running is not None:
            next(running, None)  # joined's clean-up: its errors are this item's teardown's


_CLUSTER = _Cluster()


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The session's Ray cluster (:class:`_Cluster`): shared by a run of tests using it."""
    return _CLUSTER.get(tmp_path_factory)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if "cluster" in getattr(item, "fixturenames", ()) and "cluster" not in getattr(
        nextitem, "fixturenames", ()
    ):
        _CLUSTER.stop()


def pytest_sessionfinish() -> None:
    _CLUSTER.stop()


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


@pytest.fixture(scope="session")
def tiny_act_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random ACT checkpoint for PushT (one camera, 2-d state and action)."""
    require_lerobot()
    from lerobot_fixtures import make_tiny_act

    return make_tiny_act(tmp_path_factory.mktemp("tiny_act"))


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    """The plugin's line suite (tests/helpers/line_suite.py) in a pytester dir."""
    from line_suite import make_suite

    return make_suite(pytester)


# -- docker: the real engine (scripts/setup --docker) ----------------------------------------
@pytest.fixture(scope="session")
def client() -> Iterator[Any]:
    """A client on the real Docker engine."""
    from docker_helpers import engine

    found = engine()
    require(found, "a Docker engine", "start one with .ci/docker-up (or scripts/setup --docker)")
    yield found
    found.close()


@pytest.fixture(scope="session")
def image(client: Any) -> str:
    """The test image (docker_helpers.IMAGE_SPEC), built once and cached by content."""
    from docker_helpers import IMAGE_SPEC, TAG, base_image

    from pytest_hud.runtime.docker import build_image

    base_image(client)
    return build_image(TAG, **IMAGE_SPEC)


@pytest.fixture
def mark(client: Any) -> Iterator[dict[str, str]]:
    """A label unique to one test; its containers must all be gone when the test ends."""
    import uuid

    from docker_helpers import leftovers

    value = uuid.uuid4().hex[:12]
    yield {"pytest-hud.test": value}
    assert leftovers(client, value) == []


@pytest.fixture(scope="session")
def hang_image(client: Any) -> str:
    """An image serving tests/helpers/envs/hang_env.py (its template never yields)."""
    from docker_helpers import HANG_ENV, HANG_IMAGE, base_image

    from pytest_hud.runtime.docker import build_image

    base_image(client)
    return build_image(HANG_IMAGE, module="hang_env.py", extra_files={"hang_env.py": HANG_ENV})


# -- markers: what a test needs, for subsets like -m "not docker and not ray" -------------
#: a test using one of these fixtures needs what its marker names
FIXTURE_MARKS = {
    "client": "docker",
    "image": "docker",
    "mark": "docker",
    "hang_image": "docker",
    "cluster": "ray",
    "tiny_act_path": "lerobot",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("lerobot_version"):  # depends on LeRobot: needs it
            item.add_marker("lerobot")
        for fixture, marker in FIXTURE_MARKS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(marker)
