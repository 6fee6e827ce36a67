"""``pytest_hud.evaluate`` (issue 29 #1): the plugin's evaluation from Python. Same rows,
seeds and numbers as the equivalent pytest command; an agent object the caller holds;
the caller's signal handlers, torch threads, event loop and processes left as they were."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pytest_hud import evaluate
from pytest_hud.api import EvaluationError
from pytest_hud.robot import load_agent

ROOT = Path(__file__).resolve().parents[2]
ROWS = ROOT / "examples" / "tests" / "cartpole.jsonl"


def _pytest_command(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "cli.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(ROWS),
            "-p",
            "no:cacheprovider",
            "-q",
            f"--hud-results={out}",
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.exists(), done.stdout + done.stderr
    return json.loads(out.read_text())


def _untimed(per_task: dict) -> dict:
    return {t: {k: v for k, v in st.items() if k != "seconds"} for t, st in per_task.items()}


def _episodes(doc: dict) -> list[tuple]:
    return sorted((r["nodeid"].split("::")[-1], r["success"], r["steps"]) for r in doc["rollouts"])


def _children() -> set[str]:
    out = subprocess.run(
        ["pgrep", "-P", str(os.getpid())], capture_output=True, text=True, check=False
    )
    return set(out.stdout.split())


def test_same_numbers_as_the_pytest_command(tmp_path: Path) -> None:
    cli = _pytest_command(tmp_path, "--hud-agent=random", "--hud-seed=3", "-p", "no:xdist")
    res = evaluate(ROWS, "random", seed=3, results=tmp_path / "api.json")
    assert _untimed(res.document["per_task"]) == _untimed(cli["per_task"])
    assert _episodes(res.document) == _episodes(cli)
    (task,) = res.per_task
    assert res.per_task[task].episodes == len(_episodes(cli)) and res.overall.wilson_95
    assert res.exit_code == 1 and not res.passed  # random fails some rows: a FAIL exit


def test_an_agent_object_the_caller_holds(tmp_path: Path) -> None:
    cli = _pytest_command(tmp_path, "--hud-agent=zero", "-p", "no:xdist")
    held = load_agent("zero")
    res = evaluate(ROWS, held, name="zero-at-step-0")
    assert _episodes(res.document) == _episodes(cli)
    assert res.document["agent"] == "python:zero-at-step-0"
    with pytest.raises(EvaluationError, match="workers=2 with an agent object"):
        evaluate(ROWS, held, workers=2)


def test_task_rows_from_the_callers_env_module(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from envs.pendulum import balance
    finally:
        sys.path.remove(str(ROOT / "examples"))
    res = evaluate([balance.task(seed=s) for s in range(3)], "zero", min_success=0.0)
    assert res.overall.episodes == 3 and set(res.per_task) == {"cartpole/balance"}
    assert res.gates == {"min_success": True} or all(res.gates.values())


def test_the_caller_is_left_as_it_was(tmp_path: Path) -> None:
    """Signal handlers, torch's thread count, the caller's running event loop, no child
    process and no new thread left once evaluate returns."""
    torch = pytest.importorskip("torch") if "torch" in sys.modules else None
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    threads_before = torch.get_num_threads() if torch is not None else None
    alive_before = {t.ident for t in threading.enumerate()}
    children_before = _children()
    modules_before, path_before = dict(sys.modules), list(sys.path)

    async def caller() -> int:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            ticks += 1

        res = evaluate(ROWS, "zero")  # blocking, from inside the caller's loop
        await tick()  # the caller's loop still runs afterwards
        return res.overall.episodes + 0 * ticks

    assert asyncio.run(caller()) == 3
    assert {s: signal.getsignal(s) for s in handlers} == handlers
    if torch is not None:
        assert torch.get_num_threads() == threads_before
    new = _children() - children_before
    assert not new, [Path(f"/proc/{c}/cmdline").read_bytes() for c in new]
    assert sys.path == path_before
    replaced = [n for n, m in modules_before.items() if sys.modules.get(n) is not m]
    assert replaced == []  # e.g. this suite's own conftest, shadowed by the example's
    left = [t for t in threading.enumerate() if t.ident not in alive_before and t.is_alive()]
    assert [t.name for t in left if not t.daemon] == []


def test_workers_give_the_same_numbers(tmp_path: Path) -> None:
    serial = evaluate(ROWS, "zero", seed=5)
    parallel = evaluate(ROWS, "zero", seed=5, workers=2)
    assert _episodes(parallel.document) == _episodes(serial.document)
