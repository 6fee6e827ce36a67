"""The episode ledger, provenance, resume and --hud-compare in real pytest runs,
including a run killed by a real SIGKILL mid-run and resumed from its ledger."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from line_suite import BACKWARDS_AGENTS, ENV, run

from pytest_hud.evaluation import ledger_file as ledger

WORKTREE = Path(__file__).resolve().parents[2]
GROUP = 12

SLOW = """
import os
import time
from pathlib import Path

import pytest
from line_env import reach


@pytest.mark.hud(tasks=[reach.task(goal=0.0)])
def test_slow(hud_result):
    hold = os.environ.get("HOLD_AFTER")  # the run to be killed holds after that many items
    if hold:
        with open("bodies.txt", "a") as f:
            f.write("x")
        if len(Path("bodies.txt").read_text()) > int(hold):
            time.sleep(600)  # until it is killed (the test waits 180 s at most)
    assert hud_result.success
"""


@pytest.fixture
def slow(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(line_env=ENV, test_slow=SLOW, my_agents=BACKWARDS_AGENTS)
    pytester.makeconftest("import line_env  # noqa: F401\n")
    pytester.makeini("[pytest]\nhud_agent = zero\n")
    return pytester


def _episodes(path: Path) -> int:
    if not path.exists():
        return 0
    return len(ledger.read(path).episodes)


def test_sigkill_mid_run_then_resume_runs_only_the_missing_items(slow: pytest.Pytester) -> None:
    led = slow.path / "run.ledger.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(slow.path), str(WORKTREE)])}
    env["HOLD_AFTER"] = "3"  # mid-run whatever the machine's load: the fourth item holds
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
    opts = [f"--hud-group={GROUP}", "--hud-seed=3", f"--hud-ledger={led}"]
    proc = subprocess.Popen(
        [*args, *opts], cwd=slow.path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 180
        while _episodes(led) < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, f"the run ended before it could be killed: {proc.returncode}"
        assert _episodes(led) >= 3, "no episodes reached the ledger within 180 s"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    done = ledger.read(led)
    kept = len(done.episodes)
    assert kept == 3
    assert len(done.runs) == 1
    prov = next(iter(done.runs.values()))["provenance"]
    assert prov["packages"]["pytest-hud"] is not None and prov["host"]["hostname"]
    assert prov["seed"] == 3 and prov["agent"] == "zero"

    out = slow.path / "r.json"
    result = run(slow, *opts, f"--hud-resume={led}", f"--hud-results={out}", "-rs")
    result.assert_outcomes(passed=GROUP - kept)  # resumed items are neither run nor skipped
    assert result.parseoutcomes()["resumed"] == kept
    assert f"hud resume: {kept} episodes kept from" in result.stdout.str()
    doc = json.loads(out.read_text())
    rows = doc["rollouts"]
    assert len(rows) == GROUP and doc["overall"]["episodes"] == GROUP
    assert sorted(r["rep"] for r in rows) == list(range(GROUP))
    assert sum(1 for r in rows if r.get("resumed")) == kept
    assert all(r["success"] for r in rows)
    assert doc["provenance"]["seed"] == 3
    fresh = next(r for r in rows if not r.get("resumed"))
    assert fresh["repro"].startswith("pytest ") and "--hud-seed=3" in fresh["repro"]
    assert fresh["nodeid"] in fresh["repro"]
    # the resumed run appended its own episodes to the same ledger: now complete
    assert len(ledger.merge([led]).episodes) == GROUP


def test_default_ledger_sits_beside_the_results(slow: pytest.Pytester) -> None:
    out = slow.path / "res.json"
    result = run(slow, "--hud-group=2", f"--hud-results={out}")
    result.assert_outcomes(passed=2)
    contents = ledger.read(slow.path / "res.ledger.jsonl")
    assert len(contents.episodes) == 2 and len(contents.runs) == 1
    assert {e["run"] for e in contents.episodes} == set(contents.runs)


ROWS = """
import pytest
from line_env import reach


@pytest.mark.hud(tasks=[reach.task(goal=0.0, seed=s) for s in range(8)])
def test_rows(hud_result):
    assert hud_result.success
"""


@pytest.mark.parametrize("agent, dropped", [("zero", False), ("my_agents:backwards", True)])
def test_compare_plot_and_drop_gate(slow: pytest.Pytester, agent: str, dropped: bool) -> None:
    """Eight rows (seeds of one task, pooled into it), all lost by the backwards agent: a
    drop by 100 points, p = 2/2^8. (Eight repeats of one row would be one unit.)"""
    slow.makepyfile(test_rows=ROWS)
    base = slow.path / "base.json"
    run(slow, "test_rows.py", f"--hud-results={base}").assert_outcomes(passed=8)
    new = slow.path / "new.json"
    result = run(
        slow,
        "test_rows.py",
        f"--hud-agent={agent}",
        f"--hud-results={new}",
        f"--hud-compare={base}",
        "--hud-compare-fail=20",
    )
    text = result.stdout.str()
    assert "hud compare:" in text and "line/reach" in text, text
    doc = json.loads(new.read_text())
    plot = Path(doc["compare"]["plot"])
    assert plot.exists() and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert doc["compare"]["bars"] == 2  # one task x two runs
    gate = next(g for g in doc["gates"] if g["name"] == "compare")
    assert gate["passed"] is (not dropped), gate
    verdicts = {t["task"]: t["verdict"] for t in doc["compare"]["tasks"]}
    assert verdicts["line/reach[goal=0.0]"] == ("worse" if dropped else "no significant change")
    assert result.ret == (pytest.ExitCode.TESTS_FAILED if dropped else pytest.ExitCode.OK)


def test_resume_reruns_errored_rows_and_keeps_episodes(slow: pytest.Pytester) -> None:
    """Issue 26 #2: a ledger of infrastructure ERRORs (here a substrate that cannot boot)
    resumed as "3 skipped"; an ERROR is not an episode, so resume runs it again and says
    how many it re-ran; graded rows are kept. A torn last line is still tolerated."""
    led = slow.path / "run.ledger.jsonl"
    broken = run(
        slow,
        "--hud-group=3",
        f"--hud-ledger={led}",
        f"--hud-runtime=subprocess:{slow.path / 'no-such-python'}",
    )
    broken.assert_outcomes(errors=3)
    assert [e["outcome"] for e in ledger.read(led).episodes] == ["error"] * 3

    with led.open("ab") as f:  # a writer killed mid-line
        f.write(b'{"kind":"episode","run":"x","key":"line/re')
    resumed = run(slow, "--hud-group=3", f"--hud-ledger={led}", f"--hud-resume={led}")
    resumed.assert_outcomes(passed=3)
    text = resumed.stdout.str()
    assert "hud resume: 0 episodes kept" in text and "3 errored or skipped rows run again" in text

    again = run(slow, "--hud-group=3", f"--hud-ledger={led}", f"--hud-resume={led}", "-rs")
    again.assert_outcomes()
    assert again.parseoutcomes()["resumed"] == 3
    assert "hud resume: 3 episodes kept" in again.stdout.str()
    assert ledger.read(led).torn is None  # the reopened ledger cut the torn tail
