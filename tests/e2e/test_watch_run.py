"""``python -m pytest_hud watch`` as a user runs it, on the plugin's line env (cheap): a run
folder written checkpoint by checkpoint as lerobot-train writes them, with a half-saved
one in between that must not be evaluated until lerobot marks it saved; the results, the
index, the report and a tracker's curve; a restart that skips what is done; Ctrl-C that
stops the running evaluation and leaves no process behind. The real training run
watched end to end is tests/e2e/test_train_eval.py's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from checkpoint_replay import SHIPPED, link_last, save, save_stages
from line_suite import ENV
from needs import require
from procs import alive, live_children_of
from waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]

TESTS = """
import pytest
from line_env import reach


@pytest.mark.hud(tasks=[reach.task(goal=0.0, seed=1), reach.task(goal=5.0, seed=2)])
def test_reach(hud_result):
    assert hud_result.success, hud_result.summary()
"""

SLOW_AGENT = """
import time
from pytest_hud.robot import RobotAgent, ZeroModel


class Slow(ZeroModel):
    def infer(self, batch):
        time.sleep(1.0)
        return super().infer(batch)


def slow():
    return RobotAgent(Slow(), name="slow")
"""


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "line_env.py").write_text(ENV)
    (folder / "conftest.py").write_text("import line_env  # noqa: F401\n")
    (folder / "test_line.py").write_text(TESTS)
    (folder / "my_agents.py").write_text(SLOW_AGENT)
    (folder / "pytest.ini").write_text("[pytest]\n")
    return folder


class Watcher:
    """The watcher CLI in a child process, its output collected in a file."""

    def __init__(self, cwd: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.out = cwd / f"watch-{len(list(cwd.glob('watch-*.log')))}.log"
        self._file = self.out.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pytest_hud", "watch", *args],
            cwd=cwd,
            stdout=self._file,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    def text(self) -> str:
        return self.out.read_text()

    def wait(self, seconds: float = 240) -> int:
        try:
            return self.proc.wait(timeout=seconds)
        finally:
            self._file.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self._file.close()


@pytest.fixture
def watchers() -> Iterator[list[Watcher]]:
    made: list[Watcher] = []
    yield made
    for w in made:
        w.kill()


def test_follows_a_run_evaluates_only_whole_checkpoints_and_resumes(
    suite: Path, tmp_path: Path, watchers: list[Watcher]
) -> None:
    require(__import__("importlib").util.find_spec("tensorboard"), "tensorboard",
            "pip install 'pytest-hud[tensorboard]'")  # fmt: skip
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = tmp_path / "run"  # not there yet: lerobot-train creates it, the watcher waits
    args = [str(run), "test_line.py", "--agent", "zero", "--poll", "0.3", "--hud-log=tensorboard"]
    w = Watcher(suite, *args)
    watchers.append(w)
    out = run / "hud-watch"
    save(run, 100, steps=200)
    assert wait_for(lambda: (out / "watch.jsonl").is_file(), 240), w.text()
    # step 200, half saved: the weights file half written, then whole but lerobot has not
    # repointed checkpoints/last yet (its processors and training state still to come)
    ckpt_bytes = (SHIPPED / "model.safetensors").read_bytes()
    stages = save_stages(run, 200, steps=200)
    next(stages), next(stages)  # config.json, half of model.safetensors
    half = f"model.safetensors: {len(ckpt_bytes) // 2} of {len(ckpt_bytes)} bytes written"
    assert wait_for(lambda: half in w.text(), 120), w.text()
    for _ in stages:
        pass
    assert wait_for(lambda: "not marked it saved yet (checkpoints/last is 100)" in w.text(), 120)
    assert not (out / "logs" / "200.log").exists(), w.text()
    marked = (run / "checkpoints" / "000200" / "training_state").stat().st_mtime
    link_last(run, 200)
    assert w.wait() == 0, w.text()
    assert "stopping: the final checkpoint (step 200) is evaluated" in w.text()

    done = [json.loads(line) for line in (out / "watch.jsonl").read_text().splitlines()]
    assert [d["step"] for d in done] == [100, 200]
    assert done[1]["started"] >= marked  # evaluated only once fully saved
    for d in done:
        doc = json.loads(Path(d["results"]).read_text())
        assert doc["agent"] == str(d["step"]) and doc["overall"]["episodes"] == 2
        assert d["overall"]["successes"] == 1 and d["exit_code"] == 1  # goal 5 fails
    ledger = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    assert sorted(r["agent"] for r in ledger if r["kind"] == "episode") == ["100"] * 2 + ["200"] * 2
    page = (out / "report.html").read_text()
    assert "Best checkpoint so far: <b>step 200</b>" in page and page.count("<circle") == 4
    # --hud-log passed through: one TensorBoard run, a point per checkpoint at its step
    (logdir,) = (out / "trackers" / "tensorboard").iterdir()
    acc = EventAccumulator(str(logdir))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("hud/success_rate")] == [(100, 0.5), (200, 0.5)]

    again = Watcher(suite, *args)
    watchers.append(again)
    assert again.wait() == 0, again.text()
    assert "resuming: 2 checkpoint(s) already in" in again.text()
    assert "evaluating" not in again.text()
    assert len((out / "watch.jsonl").read_text().splitlines()) == 2


def _descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        for child in live_children_of(todo.pop()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def test_ctrl_c_stops_the_running_evaluation_and_a_restart_redoes_it(
    suite: Path, tmp_path: Path, watchers: list[Watcher]
) -> None:
    run = tmp_path / "run"
    save(run, 100, steps=100)
    slow = f"{suite / 'my_agents.py'}:slow"
    w = Watcher(suite, str(run), "test_line.py", "--agent", slow, "--poll", "0.3", "--grace", "60")
    watchers.append(w)
    log = run / "hud-watch" / "logs" / "100.log"
    assert wait_for(lambda: log.is_file() and "test_line.py" in log.read_text(), 240), w.text()
    running = _descendants(w.proc.pid)
    assert running  # the evaluation's pytest (and its sims)
    os.kill(w.proc.pid, signal.SIGINT)
    assert w.wait(240) == 130, w.text()
    assert "interrupted: the running evaluation was stopped" in w.text()
    assert wait_for(lambda: not [p for p in running if alive(p)], 60), [
        Path(f"/proc/{p}/cmdline").read_bytes() for p in running if alive(p)
    ]
    assert "KeyboardInterrupt" in log.read_text()  # pytest stopped as at a terminal
    assert not (run / "hud-watch" / "watch.jsonl").exists()

    again = Watcher(suite, str(run), "test_line.py", "--agent", "zero", "--poll", "0.3")
    watchers.append(again)
    assert again.wait() == 0, again.text()
    assert "step 100: 1/2" in again.text()
