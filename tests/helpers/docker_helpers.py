"""The real Docker engine, for the tests that need one: the client, the test images and
the labels that find what a test left behind."""

from __future__ import annotations

import time
from typing import Any

from paths import ENVS, EXAMPLES

#: the test image: this project, examples/envs and a vectorized pendulum
TAG = "pytest-hud-test:latest"
IMAGE_SPEC: dict[str, Any] = {
    "module": "examples/envs/pendulum.py",
    "extra_files": {
        "examples/envs": EXAMPLES / "envs",
        "tests/helpers/envs/vector_pendulum.py": ENVS / "vector_pendulum.py",
    },
}
#: an image whose env hangs in its template (the interrupt tests)
HANG_IMAGE = "pytest-hud-hang:test"
HANG_ENV = ENVS / "hang_env.py"


def engine() -> Any:
    """A docker client on a reachable engine, or None."""
    try:
        import docker
    except ImportError:
        return None
    for attempt in range(3):  # a loaded engine can miss one ping: absent only if it keeps on
        try:
            client = docker.from_env()
            client.ping()
        except Exception:
            time.sleep(2.0 * (attempt + 1))
            continue
        return client
    return None


def leftovers(client: Any, value: str) -> list[str]:
    """Containers still labelled with one test's ``pytest-hud.test`` mark."""
    found = client.containers.list(all=True, filters={"label": f"pytest-hud.test={value}"})
    return [c.short_id for c in found]


def session_containers(token: str) -> list[str]:
    """Ids of containers (running or not) labelled with this session's id."""
    from pytest_hud.runtime.docker.engine import _client

    # sparse: no per-container inspect, which races with a removal in progress (404)
    labels = {"label": f"pytest-hud.session={token}"}
    found = _client().containers.list(all=True, sparse=True, filters=labels)
    return [c.short_id for c in found]


def base_image(client: Any) -> str:
    """The base env images build FROM, as the package finds it: on the engine, pulled, or
    built once from this host's Python (under the build lock other workers wait on)."""
    from pytest_hud.runtime.docker.base import ensure_base
    from pytest_hud.runtime.docker.image import build_lock

    with build_lock():
        return ensure_base(client)
