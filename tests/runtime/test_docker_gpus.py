"""GPUs for containers only when asked (issue 54): ``--hud-docker-gpus`` (through
``$PYTEST_HUD_DOCKER_GPUS`` on the ``--hud-runtime=docker`` forms), ``DockerRuntime(gpus=)``,
or a row's ``runtime_config.gpu``. This machine has no GPU and its engine no GPU runtime, so
the request is checked as the engine would receive it (``create_kwargs``), not by starting a
container on a GPU.
"""

from __future__ import annotations

import pytest

from pytest_hud import DockerRuntime, Task
from pytest_hud.runtime.docker.container import GPUS_ENV

ROW = Task("pendulum", "swing_up", {"seed": 0})


def request(runtime: DockerRuntime, task: Task = ROW) -> list[dict[str, object]]:
    """The device requests of the container ``runtime`` would create for ``task``."""
    found = runtime.create_kwargs(task, "img", "envs.pendulum").get("device_requests") or []
    return [dict(r) for r in found]  # type: ignore[attr-defined]


def test_no_gpu_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(GPUS_ENV, raising=False)
    assert request(DockerRuntime("img", forward_env=True)) == []
    monkeypatch.setenv(GPUS_ENV, "all")  # a runtime built in Python stays as written
    assert request(DockerRuntime("img")) == []


@pytest.mark.parametrize(
    ("asked", "count", "ids"),
    [("all", -1, []), ("2", 2, []), ("device=0,3", 0, ["0", "3"])],
)
def test_the_session_asks_for_gpus_as_docker_run_gpus_reads_them(
    monkeypatch: pytest.MonkeyPatch, asked: str, count: int, ids: list[str]
) -> None:
    monkeypatch.setenv(GPUS_ENV, asked)
    (got,) = request(DockerRuntime("img", forward_env=True))
    assert got["Capabilities"] == [["gpu"]]
    assert got["Count"] == count and got["DeviceIDs"] == ids
    assert request(DockerRuntime("img", gpus=asked)) == [got]


def test_a_rows_own_gpu_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(GPUS_ENV, "all")
    row = Task("pendulum", "swing_up", {"seed": 0}, runtime_config={"gpu": "1"})
    (got,) = request(DockerRuntime("img", forward_env=True), row)
    assert got.get("Count") == 1
