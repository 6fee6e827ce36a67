"""``pytest_hud.evaluate`` (issue 29 #1): the plugin's evaluation from Python. Same rows,
seeds and numbers as the equivalent pytest command; an agent object the caller holds;
the caller's signal handlers, torch threads, event loop and processes left as they were."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from needs import require, require_lerobot
from procs import live_children_of, tcp_sockets
from waiting import wait_for

from pytest_hud import Taskset, evaluate
from pytest_hud.api import EvaluationError
from pytest_hud.errors import ModuleColumnError
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


EVIL_ENV = """
from pathlib import Path

Path(__file__).with_name("imported").write_text("this module ran")

from pytest_hud import Environment

env = Environment("evil")
"""


def test_a_rows_module_outside_the_project_is_refused_as_under_pytest(tmp_path: Path) -> None:
    """Issue 39 #6: a task file's row naming a module outside the project was imported and
    run by ``evaluate()`` (it passed ``--hud-allow-modules`` always). Now the rule of pytest's
    task files applies (a dotted name, or a path in the project), before anything is
    imported; ``allow_modules=True`` is the opt-in."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "evil_env.py").write_text(EVIL_ENV)
    rows = tmp_path / "rows.jsonl"
    row = {"env": "evil", "id": "t", "args": {}, "module": str(outside / "evil_env.py")}
    rows.write_text(json.dumps(row) + "\n")
    tasks = list(Taskset.load(rows))
    with pytest.raises(ModuleColumnError, match="outside .*pass allow_modules=True"):
        evaluate(tasks, "zero")
    assert not (outside / "imported").exists()
    with pytest.raises(EvaluationError):  # imported and run: evil declares no template
        evaluate(tasks, "zero", allow_modules=True)
    assert (outside / "imported").exists()


def test_the_caller_is_left_as_it_was(tmp_path: Path) -> None:
    """Signal handlers, torch's thread count (torch imported by the caller), the caller's
    running event loop, no child process, no TCP port or connection and no new thread
    left once evaluate returns."""
    require(importlib.util.find_spec("torch"), "torch", "scripts/setup --lerobot")
    import torch

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    torch.set_num_threads(3)  # a count of the caller's own, no default anyone sets
    alive_before = {t.ident for t in threading.enumerate()}
    children_before = _children()
    sockets_before = tcp_sockets()
    modules_before, path_before = dict(sys.modules), list(sys.path)
    registry_before = logging.Logger.manager.loggerDict  # this session's (_plugin/loggers.py)

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
    assert torch.get_num_threads() == 3
    assert tcp_sockets() - sockets_before == set()  # the env server's port, its connections
    new = _children() - children_before
    assert not new, [Path(f"/proc/{c}/cmdline").read_bytes() for c in new]
    assert sys.path == path_before
    assert logging.Logger.manager.loggerDict is registry_before
    replaced = [n for n, m in modules_before.items() if sys.modules.get(n) is not m]
    assert replaced == []  # e.g. this suite's own conftest, shadowed by the example's
    left = [t for t in threading.enumerate() if t.ident not in alive_before and t.is_alive()]
    assert [t.name for t in left if not t.daemon] == []


def test_workers_give_the_same_numbers(tmp_path: Path) -> None:
    serial = evaluate(ROWS, "zero", seed=5)
    parallel = evaluate(ROWS, "zero", seed=5, workers=2)
    assert _episodes(parallel.document) == _episodes(serial.document)


INTERRUPTED = """
import json, os, signal, sys, time
from pathlib import Path
from pytest_hud import Taskset, evaluate
from pytest_hud.errors import ModuleColumnError
from pytest_hud.robot import RobotAgent, ZeroModel


class Slow(ZeroModel):
    def infer(self, batch):
        Path(sys.argv[2]).touch()  # the rollouts are under way
        time.sleep(0.5)
        return super().infer(batch)


try:
    evaluate(sys.argv[1], RobotAgent(Slow(), name="slow"))
    out = {"interrupted": False}
except KeyboardInterrupt:
    out = {"interrupted": True}
out["sigint_handler_is_pythons"] = signal.getsignal(signal.SIGINT) is signal.default_int_handler
print("RESULT " + json.dumps(out), flush=True)
"""


def test_ctrl_c_during_evaluate_is_handled_as_in_pytest(tmp_path: Path) -> None:
    """SIGINT mid-rollout: the session stops as pytest does at a terminal (its summary
    says KeyboardInterrupt), the caller gets KeyboardInterrupt with its own SIGINT handler
    back, and the session's sims and servers are gone."""
    script = tmp_path / "caller.py"
    script.write_text(INTERRUPTED)
    started = tmp_path / "started"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(ROWS), str(started)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert wait_for(started.exists, 240)
        during = live_children_of(proc.pid)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
    assert proc.returncode == 0, output[-3000:]
    result = json.loads(output.split("RESULT ", 1)[1])
    assert result == {"interrupted": True, "sigint_handler_is_pythons": True}, output[-3000:]
    assert "KeyboardInterrupt" in output
    assert not [p for p in during if Path(f"/proc/{p}").exists()]


def test_evaluate_logs_to_a_tracker(tmp_path: Path) -> None:
    """``evaluate(log=...)``: the figures reach the tracker at ``step`` (TensorBoard's event
    files, read back with its reader), in ``log_dir``; a second call with the same
    ``log_run`` adds to the same run."""
    require(importlib.util.find_spec("tensorboard"), "tensorboard", "scripts/setup --trackers")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    for step in (10, 20):
        res = evaluate(ROWS, "zero", log=["tensorboard"], step=step, log_dir=tmp_path,
                       log_run="training")  # fmt: skip
        assert res.overall.episodes == 3
    acc = EventAccumulator(str(tmp_path / "tensorboard" / "training"))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("hud/episodes")] == [(10, 3.0), (20, 3.0)]


@pytest.mark.lerobot_version
def test_an_in_memory_lerobot_policy_at_a_training_step(tmp_path: Path) -> None:
    """A policy the caller trains in memory, evaluated through ``evaluate`` with
    ``lerobot_agent(policy, preprocess=, postprocess=)``: after one optimizer step it acts
    exactly as the same weights saved and loaded by ``lerobot:PATH`` do, and unlike the
    weights before the step; the caller's torch thread count is left as it was."""
    require_lerobot()
    import torch
    from lerobot_fixtures import make_tiny_act

    from pytest_hud.plumbing.loader import load_module
    from pytest_hud.robot import load_agent
    from pytest_hud.robot.agent.lerobot import lerobot_agent, load_policy

    pusht = load_module(Path(__file__).resolve().parents[1] / "helpers" / "envs" / "pusht_env.py")
    rows = [pusht.env.templates["push"].task(seed=s) for s in (1, 2)]
    before = make_tiny_act(tmp_path / "before")
    policy, pre, post = load_policy(before)
    policy.train()
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.5)
    pad = torch.zeros(2, 10, dtype=torch.bool)
    batch = pre({"observation.image": torch.rand(2, 3, 96, 96),
                 "observation.state": torch.rand(2, 2) * 512,
                 "action": torch.rand(2, 10, 2) * 512, "action_is_pad": pad,
                 "task": ["push", "push"]})  # fmt: skip
    loss, _ = policy.forward(batch)
    loss.backward()
    optimizer.step()  # the held policy is now at training step 1

    def acted(agent: Any) -> dict[int, list]:
        """The actions of each row's episode, by seed (the last episode of a seed wins)."""
        actions: dict[int, list] = {}
        agent.observers.append(lambda run, spaces: _Actions(actions.setdefault(
            run.task.args["seed"], []), fresh=True))  # fmt: skip
        res = evaluate(rows, agent, args=["--hud-max-steps=8"])
        assert res.overall.episodes == 2 and res.overall.errors == 0
        return actions

    torch.set_num_threads(2)
    held = acted(lerobot_agent(policy, preprocess=pre, postprocess=post, name="step-1"))
    assert torch.get_num_threads() == 2
    for part in (policy, pre, post):
        part.save_pretrained(tmp_path / "step1")
    saved = acted(load_agent(f"lerobot:{tmp_path / 'step1'}"))
    untrained = acted(load_agent(f"lerobot:{before}"))
    assert sorted(held) == sorted(saved) == [1, 2] and all(len(a) == 8 for a in held.values())
    assert all(np.array_equal(held[s], saved[s]) for s in held)
    assert not all(np.array_equal(held[s], untrained[s]) for s in held)


class _Actions:
    """An episode observer keeping every action the agent executed."""

    def __init__(self, into: list, fresh: bool = False) -> None:
        if fresh:
            into.clear()
        self.into = into

    def step(self, data: dict, action: Any) -> None:
        self.into.append(np.array(action, copy=True))

    def end(self, ok: bool) -> dict:
        return {}
