"""Which devices a session's models go on (issue 54): ``--hud-devices`` read, ``auto``
resolved from what torch sees (honouring CUDA_VISIBLE_DEVICES), a server placed on one GPU
seeing it alone, workers spread over the devices. This machine has no GPU: where one is
needed, ``torch.cuda`` is faked (its count, as torch reads CUDA_VISIBLE_DEVICES) and the
driver's presence with it.
"""

from __future__ import annotations

import os

import pytest

from pytest_hud.features.devices import placement
from pytest_hud.features.devices.figures import html_section, server_line, terminal_lines
from pytest_hud.features.devices.placement import (
    check_devices,
    device_of,
    parse_devices,
    resolve,
    visible_to,
)


@pytest.fixture
def gpus(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Two GPUs where torch looks (the count honours CUDA_VISIBLE_DEVICES, as torch's)."""
    import torch

    def count() -> int:
        listed = os.environ.get("CUDA_VISIBLE_DEVICES")
        return 2 if listed is None else len([d for d in listed.split(",") if d])

    monkeypatch.setattr(placement, "_no_driver", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", count)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("text", "devices"),
    [
        ("auto", ("auto",)),
        ("cpu", ("cpu",)),
        ("cuda", ("cuda:0",)),
        ("cuda:0, cuda:1", ("cuda:0", "cuda:1")),
        ("CUDA:3", ("cuda:3",)),
    ],
)
def test_the_forms_devices_take(text: str, devices: tuple[str, ...]) -> None:
    assert parse_devices(text) == devices


@pytest.mark.parametrize("text", ["gpu", "cuda:x", "", "cuda:0,cuda:0", "auto,cpu"])
def test_anything_else_names_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match="auto or a comma-separated list|twice"):
        parse_devices(text)


def test_auto_is_the_cpu_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(placement, "_no_driver", lambda: True)  # as on this machine
    assert resolve(("auto",)) == ("cpu",)
    assert "this process sees no GPU" in str(check_devices(("cuda:0",)))


def test_auto_is_every_visible_gpu(gpus: pytest.MonkeyPatch) -> None:
    assert resolve(("auto",)) == ("cuda:0", "cuda:1")
    assert check_devices(("cuda:0", "cuda:1")) is None
    problem = check_devices(("cuda:2",))
    assert problem is not None and "names cuda:2, but this process sees 2 GPU(s)" in problem


def test_cuda_visible_devices_is_honoured(gpus: pytest.MonkeyPatch) -> None:
    gpus.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert resolve(("auto",)) == ("cuda:0",)
    assert visible_to("cuda:0") == {"CUDA_VISIBLE_DEVICES": "3"}
    gpus.setenv("CUDA_VISIBLE_DEVICES", "")
    assert resolve(("auto",)) == ("cpu",)  # no GPU may be used


def test_a_server_on_a_gpu_sees_that_one_alone(gpus: pytest.MonkeyPatch) -> None:
    assert visible_to("cuda:1") == {"CUDA_VISIBLE_DEVICES": "1"}
    gpus.setenv("CUDA_VISIBLE_DEVICES", "GPU-aa,GPU-bb")  # ids, as nvidia-smi -L lists them
    assert visible_to("cuda:1") == {"CUDA_VISIBLE_DEVICES": "GPU-bb"}
    assert visible_to("cpu") == {}


def test_worker_n_uses_device_n_mod_n() -> None:
    devices = ("cuda:0", "cuda:1", "cuda:2")
    placed = {w: device_of(w, devices) for w in ("gw0", "gw1", "gw2", "gw3", "gw7")}
    assert placed == {
        "gw0": "cuda:0",
        "gw1": "cuda:1",
        "gw2": "cuda:2",
        "gw3": "cuda:0",
        "gw7": "cuda:1",
    }


SERVER = {
    "spec": "lerobot:ckpt",
    "device": "cuda:0",
    "pid": 7,
    "forwards": 10,
    "requests": 75,
    "mean_width": 7.5,
    "forward_ms": 52.25,
    "busy_share": 0.934,
    "requests_per_worker": {"gw1": 40, "gw0": 35},
}


def test_the_figures_as_shown() -> None:
    line = server_line(SERVER)
    assert line == (
        "lerobot:ckpt on cuda:0 (pid 7): 75 requests in 10 forwards, mean width 7.50, "
        "forward 52.2 ms, model busy 93% of its serving span; requests per worker: gw0 35, "
        "gw1 40"
    )
    block = {"placement": "shared", "devices": ["cuda:0"], "servers": [SERVER]}
    assert terminal_lines(block) == ["models: placement shared on cuda:0", f"  model server {line}"]
    died = {**SERVER, "died": "the model server ... was killed by signal SIGKILL (9); fix: x\nout"}
    assert "DIED: the model server ... was killed by signal SIGKILL (9); fix: x" in server_line(
        died
    )
    page = html_section({**block, "servers": [died]})
    assert "<td>gw0: 35, gw1: 40</td>" in page and 'class="error"' in page
