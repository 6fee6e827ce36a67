"""``--hud-agent=pi05`` resolves its checkpoint without waiting on an unreachable hub.

Offline, ``from_pretrained`` on a hub id retries with backoff (~21 s an attempt here);
these tests pin that the pi05 preset never gets that far: the local hub cache first,
then one bounded name lookup, else a CheckpointError naming the ``pi05:/path`` form.
No test dials anything: the lookup is replaced where it would run.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from needs import require_lerobot

from pytest_hud.errors import CheckpointError
from pytest_hud.robot.agent import hub, lerobot
from pytest_hud.robot.agent.registry import load_agent

pytestmark = pytest.mark.lerobot_version


@pytest.fixture
def empty_hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    require_lerobot()
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)

    def no_download(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("pi05 went on to load from the hub")

    monkeypatch.setattr(lerobot, "lerobot_agent", no_download)
    return cache


def test_offline_fails_at_once_naming_the_path_form(
    empty_hub_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_lookup(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("HF_HUB_OFFLINE is set, yet the hub's name was looked up")

    monkeypatch.setattr(socket, "getaddrinfo", no_lookup)
    with pytest.raises(CheckpointError) as info:
        load_agent("pi05")
    message = str(info.value)
    assert "lerobot/pi05_libero_finetuned" in message
    assert "HF_HUB_OFFLINE is set" in message
    assert "--hud-agent=pi05:/path/to/pi05_libero_finetuned" in message


def test_unresolvable_hub_fails_at_once(
    empty_hub_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    looked_up: list[str] = []

    def no_dns(host: str, *args: Any, **kwargs: Any) -> Any:
        looked_up.append(host)
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    with pytest.raises(CheckpointError, match="the hub is unreachable") as info:
        load_agent("pi05")
    assert looked_up == ["huggingface.co"]  # one lookup, no retries
    assert "pi05:/path" in str(info.value)


def test_reachable_hub_is_left_to_lerobot(
    empty_hub_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as server:  # the hub, as a listening loopback port
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        assert hub.cached_or_reachable("lerobot/pi05_libero_finetuned", hint="") == (
            "lerobot/pi05_libero_finetuned"
        )


def test_a_cached_checkpoint_loads_without_the_network(
    empty_hub_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hub cache's layout (refs/main -> snapshots/<rev>/) holding a tiny checkpoint."""
    from lerobot_fixtures import make_tiny_act

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo = empty_hub_cache / "models--lerobot--pi05_libero_finetuned"
    revision = "0" * 40
    make_tiny_act(repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    loaded: list[str] = []
    monkeypatch.setattr(
        lerobot, "lerobot_agent", lambda source, name: loaded.append(source) or name
    )
    assert load_agent("pi05") == "pi05"
    assert loaded == [str(repo / "snapshots" / revision)]


@pytest.mark.docker
def test_the_headline_command_offline_is_one_usage_error_naming_the_path_form(
    tmp_path: Path,
) -> None:
    """``pytest --hud-runtime=docker --hud-agent=pi05 -n 2`` on the LIBERO suite, offline:
    the xdist controller's preflight fails once, before any worker or container starts,
    with pi05's own fix (it used to print the generic hub message without the form)."""
    import os
    import subprocess
    import sys

    require_lerobot()
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path / "hub"))
    argv = [sys.executable, "-m", "pytest", "--pyargs", "pytest_hud.suites.libero",
            "--hud-runtime=docker", "--hud-agent=pi05", "-n", "2",
            "-p", "no:cacheprovider"]  # fmt: skip
    done = subprocess.run(
        argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    out = done.stdout + done.stderr
    assert done.returncode == 4, out[-3000:]  # pytest's usage error
    assert out.count("--hud-agent=pi05:/path/to/pi05_libero_finetuned") == 1, out[-3000:]
    assert "HF_HUB_OFFLINE is set" in out and "[gw" not in out  # no worker started
