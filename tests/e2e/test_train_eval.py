"""The train/eval loop (examples/train_eval/run.py --tiny) from nothing: expert episodes
recorded with the plugin, lerobot-train on them, every checkpoint evaluated by the plugin,
the final one better than the same ACT untrained; the plugin acting with a trained
checkpoint exactly as lerobot's select_action does on the same observations; and
``python -m pytest_hud watch`` following lerobot-train's output while it trains."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from needs import require, require_lerobot

ROOT = Path(__file__).resolve().parents[2]
#: The tiny loop takes ~3 min on a quiet 2-core machine, far longer on a shared one.
LOOP_TIMEOUT_S = 2400
pytestmark = [
    pytest.mark.metaworld,
    pytest.mark.slow,
    pytest.mark.timeout(LOOP_TIMEOUT_S + 120),
    pytest.mark.xdist_group("train_eval"),  # one worker: the loop runs once, not per worker
]
#: CI runs the loop on its main stack (the README's LeRobot); on the second stack (``-m
#: lerobot_version``), where its other tests already cover a checkpoint's loading and
#: select_action, at full size only: ``python bench/full_size.py --part second-stack``.
if os.environ.get("PYTEST_HUD_FULL_SIZE") == "1":
    pytestmark.append(pytest.mark.lerobot_version)
LOOP = ROOT / "examples" / "train_eval"


def _run_py() -> Any:
    """examples/train_eval/run.py as a module: its stages and budgets."""
    spec = importlib.util.spec_from_file_location("train_eval_run", LOOP / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tiny_budget() -> dict:
    return dict(_run_py().BUDGETS["tiny"])


def _watcher(out: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``python -m pytest_hud watch`` on the loop's lerobot-train output folder (not there
    yet: it waits), evaluating each checkpoint as run.py's evaluation stage does (its rows,
    seeds and thread count), while the loop trains. It stops after the final step."""
    budget = _tiny_budget()
    rows = {"MW_TASKS": budget["tasks"], "MW_SEED0": "100", "MW_SEEDS": str(budget["evals"])}
    argv = [sys.executable, "-m", "pytest_hud", "watch", str(out / "train"),
            str(LOOP / "test_metaworld.py"), "--hud-shared=1", "-q", "--poll", "2",
            "--out", str(out.parent / "watch"), "--idle-timeout", str(LOOP_TIMEOUT_S)]  # fmt: skip
    with (out.parent / "watch.log").open("wb") as log:
        env = dict(env, OMP_NUM_THREADS="1", **rows)
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip


@pytest.fixture(scope="session")  # one run a worker, however xdist orders the items
def loop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_lerobot()
    require(importlib.util.find_spec("metaworld"), "metaworld", "pip install metaworld packaging")
    out = tmp_path_factory.mktemp("train_eval") / "loop"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    watcher = _watcher(out, env)
    # its own process group: a timeout kills run.py AND the lerobot-train / pytest it runs
    proc = subprocess.Popen(
        [sys.executable, str(LOOP / "run.py"), str(out), "--tiny"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=LOOP_TIMEOUT_S)
        with contextlib.suppress(subprocess.TimeoutExpired):
            watcher.wait(timeout=LOOP_TIMEOUT_S)  # it stops once the final step is evaluated
    finally:
        for child in (proc, watcher):
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait(timeout=60)
    assert proc.returncode == 0, output[-6000:]
    return out


def test_tiny_loop_makes_every_artefact_and_learns(loop: Path) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata

    summary = json.loads((loop / "summary.json").read_text())
    budget = summary["budget"]
    tasks = budget["tasks"].split(",")
    meta = LeRobotDatasetMetadata("local/metaworld", root=loop / "dataset")
    assert meta.total_episodes == len(tasks) * budget["demos"]
    assert {"observation.state", "observation.environment_state", "next.success"} <= set(
        meta.features
    )
    assert all(meta.episodes["grade/success"])  # the scripted experts succeed
    assert not [k for k in meta.features if "images" in k]  # recorded without the sketch
    steps = sorted(int(s) for s in summary["success"])
    every = budget["steps"] // budget["checkpoints"]
    assert steps == [0, *range(every, budget["steps"] + 1, every)]
    for step in steps[1:]:
        folder = loop / "train" / "checkpoints" / f"{step:06d}" / "pretrained_model"
        assert (folder / "model.safetensors").is_file()
    for step in steps:
        doc = json.loads((loop / "eval" / f"{step}.json").read_text())
        assert doc["agent"] == str(step)  # --hud-checkpoint names the checkpoint
        assert doc["overall"]["episodes"] == len(tasks) * budget["evals"]
    first, last = (summary["success"][str(s)]["overall"] for s in (steps[0], steps[-1]))
    assert last["successes"] > first["successes"]  # the trained weights are the ones acting
    # every earlier checkpoint ran with the final one's results as --hud-baseline
    assert last["baseline_gate_ok"] is None
    assert all(isinstance(summary["success"][str(s)]["overall"]["baseline_gate_ok"], bool)
               for s in steps[:-1])  # fmt: skip
    assert (loop / "success.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the per-checkpoint xfails the table implies: exactly the tasks failed on every seed
    expected = tomllib.loads((loop / "expect.toml").read_text())
    for step in steps:
        never = {t for t, c in summary["success"][str(step)].items() if c["successes"] == 0}
        globs = set(expected.get(str(step), {}).get("xfail", {}))
        assert globs == {f"metaworld/{t}-*" for t in never - {"overall"}}, (step, globs)
    # the report stage: the final checkpoint again, every episode animated, the curve shown,
    # and its gate against the untrained step passed (run.py exits 0 only then)
    html = (loop / "report.html").read_text()
    episodes = len(tasks) * budget["evals"]
    assert html.count('alt="episode" src="data:image/gif') >= episodes
    assert "data:image/png" in html  # success.png, embedded in the Figures section
    report = json.loads((loop / "report.json").read_text())
    assert report["agent"] == str(steps[-1]) and report["overall"]["episodes"] == episodes
    assert report["gates"] and all(g["passed"] for g in report["gates"])


def test_plugin_acts_as_lerobots_select_action(loop: Path) -> None:
    sys.path.insert(0, str(LOOP))
    from fidelity import compare

    summary = json.loads((loop / "summary.json").read_text())
    last = max(int(s) for s in summary["success"])
    folder = loop / "train" / "checkpoints" / f"{last:06d}" / "pretrained_model"
    ours, theirs, _ = compare(folder, summary["budget"]["tasks"].split(",")[0], seed=100)
    assert len(ours) > 10  # several chunks: select_action's queue refilled in between
    np.testing.assert_array_equal(ours, theirs)


def test_the_watcher_evaluated_each_checkpoint_once_saved(loop: Path) -> None:
    """The watcher ran beside the loop from its start: each of lerobot-train's checkpoints
    evaluated once lerobot had saved it whole (after its training state, which is written
    last), with the same successes per task as run.py's own evaluation of that checkpoint,
    then it stopped at train_config.json's final step."""
    text = (loop.parent / "watch.log").read_text()
    assert "stopping: the final checkpoint (step 300) is evaluated" in text, text[-4000:]
    watch = loop.parent / "watch"
    done = [json.loads(line) for line in (watch / "watch.jsonl").read_text().splitlines()]
    summary = json.loads((loop / "summary.json").read_text())
    steps = sorted(int(s) for s in summary["success"] if s != "0")
    assert [d["step"] for d in done] == steps, text[-4000:]
    for d in done:
        state = loop / "train" / "checkpoints" / f"{d['step']:06d}" / "training_state"
        assert d["started"] >= (state / "training_step.json").stat().st_mtime
        ours = json.loads(Path(d["results"]).read_text())["per_task"]
        theirs = json.loads((loop / "eval" / f"{d['step']}.json").read_text())["per_task"]
        assert {t: (c["successes"], c["episodes"]) for t, c in ours.items()} == {
            t: (c["successes"], c["episodes"]) for t, c in theirs.items()
        }
    page = (watch / "report.html").read_text()
    assert f"Best checkpoint so far: <b>step {max(done, key=_rank)['step']}</b>" in page


def _rank(entry: dict) -> tuple:
    o = entry["overall"]
    return (o["success_rate"], o["wilson_95"][0], entry["step"])


def test_a_sweep_of_the_runs_checkpoints_in_one_session_counts_as_separate_sessions(
    loop: Path, tmp_path: Path
) -> None:
    """Every checkpoint of the tiny run as one arm of one paired session (a lerobot: glob,
    lerobot-train's ``last`` link counted once), with run.py's per-checkpoint expectations:
    each checkpoint's episodes are those of its own session (run.py's eval/STEP.json)."""
    summary = json.loads((loop / "summary.json").read_text())
    budget = summary["budget"]
    steps = sorted(int(s) for s in summary["success"] if int(s) > 0)  # 0: not a checkpoint
    out, html = tmp_path / "sweep.json", tmp_path / "sweep.html"
    env = dict(os.environ, PYTHONPATH=str(ROOT), MW_TASKS=budget["tasks"], MW_SEED0="100",
               MW_SEEDS=str(budget["evals"]), OMP_NUM_THREADS="1")  # fmt: skip
    argv = [sys.executable, "-m", "pytest", str(LOOP / "test_metaworld.py"), "-q",
            "-p", "no:cacheprovider", "--hud-shared=1",
            f"--hud-agent=lerobot:{loop}/train/checkpoints/*/pretrained_model",
            f"--hud-expect={loop / 'expect.toml'}", "--hud-gate=none",
            f"--hud-results={out}", f"--html={html}", "--self-contained-html"]  # fmt: skip
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=LOOP_TIMEOUT_S)
    # report only: exit 0 unless an error or a strict XPASS (a per-checkpoint xfail broken)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    doc = json.loads(out.read_text())
    agents = doc["agents"]
    assert [a["step"] for a in agents] == steps  # sorted by step, "last" not an arm
    assert [a["label"] for a in agents] == [str(s) for s in steps]

    def episodes(rows: list[dict]) -> dict[tuple[str, int], bool]:
        return {(r["task"], r["seed"]): r["success"] for r in rows}

    expected = tomllib.loads((loop / "expect.toml").read_text())
    for arm in agents:
        alone = json.loads((loop / "eval" / f"{arm['step']}.json").read_text())
        mine = [r for r in doc["rollouts"] if r["arm"] == arm["arm"]]
        assert episodes(mine) == episodes(alone["rollouts"]), arm["step"]
        for task, counts in alone["per_task"].items():
            assert arm["per_task"][task]["successes"] == counts["successes"], (arm["step"], task)
        # this checkpoint's table (by its step) made its never-solved tasks strict xfails
        globs = expected.get(arm["label"], {}).get("xfail", {})
        xfailed = {r["task"] for r in mine if r["outcome"] == "xfailed"}
        assert xfailed == {g.removesuffix("-*") for g in globs}, (arm["step"], xfailed, globs)
    assert Path(doc["paired"]["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = html.read_text()
    assert "success per task vs training step" in page and "Arms side by side" in page


@pytest.mark.lerobot_version
def test_each_stage_runs_on_this_lerobot_at_its_smallest(tmp_path: Path) -> None:
    """The loop's stages with this LeRobot release at their smallest (what CI's second stack
    runs in place of the tiny loop): the expert's episode recorded by the plugin,
    lerobot-train's few steps on it with this release's flags, and the checkpoint it saved
    evaluated by the plugin under its step's name, as run.py does."""
    require_lerobot()
    require(importlib.util.find_spec("metaworld"), "metaworld", "pip install metaworld packaging")
    run = _run_py()
    budget = {"tasks": "drawer-open-v3", "demos": 1, "steps": 4, "checkpoints": 1,
              "batch_size": 4, "evals": 1}  # fmt: skip
    out = tmp_path / "loop"
    out.mkdir()
    run.record(out, budget)
    run.train(out, budget)
    found = run.checkpoints(out)
    assert sorted(found) == [0, 4], found
    assert (found[4] / "model.safetensors").is_file()
    run.evaluate(out, 4, found[4], budget)
    doc = json.loads((out / "eval" / "4.json").read_text())
    assert doc["agent"] == "4"  # --hud-checkpoint names the checkpoint
    assert [(r["task_id"], r["error"]) for r in doc["rollouts"]] == [("drawer-open-v3", None)]
