"""Verdicts and aggregation, tested on real pytest runs (pytester subprocesses) over the
deterministic line env of ``test_plugin`` (the ``zero`` agent succeeds exactly when
``goal <= 0``): the gate rule and the exit code with and without ``-n``, report-only
runs, baselines (provenance, power, interrupted runs), readable ids, row seeds under
``--hud-group``, per-task aggregates."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

import pytest
from line_suite import run

GATED = """
import pytest
from line_env import reach

@pytest.mark.hud(tasks=[reach.task(goal=0.0, seed=1), reach.task(goal=5.0, seed=2)],
                 min_success=0.0)
def test_gated(hud_result):
    assert hud_result.success
"""

UNGATED_ROWS = '{"env": "line", "id": "reach", "args": {"goal": 5, "seed": 3}}\n'


def hud_lines(result: pytest.RunResult) -> list[str]:
    """The verdict lines of the hud summary (one per gate, ungated, errors)."""
    return sorted(
        line for line in result.outlines if re.match(r"^(PASSED|FAILED) (?!\S+::\S+ - )", line)
    )


@pytest.mark.parametrize("ungated", [False, True], ids=["gated", "plus-ungated-file"])
def test_same_exit_code_and_gate_lines_with_and_without_xdist(suite, ungated) -> None:
    suite.makepyfile(test_gated=GATED)
    args = ["test_gated.py"]
    if ungated:
        suite.path.joinpath("rows.jsonl").write_text(UNGATED_ROWS)
        args.append("rows.jsonl")
    serial = run(suite, *args)
    parallel = run(suite, *args, "-n", "2")
    assert serial.ret == parallel.ret == (1 if ungated else 0)
    assert hud_lines(serial) == hud_lines(parallel)
    lines = hud_lines(serial)
    assert any(
        line.startswith("PASSED test_gated.py::test_gated: success rate 50.0%") for line in lines
    )
    assert any("[owns 1 episode failure]" in line for line in lines)
    if ungated:
        assert any(
            line.startswith("FAILED ungated: 1 episode failure in items no gate covers")
            for line in lines
        )


def test_errors_always_fail_even_when_the_gate_clears(suite) -> None:
    suite.makepyfile(test_gated=GATED)
    suite.makepyfile(
        test_broken="""
import pytest
from line_env import broken

@pytest.mark.hud(tasks=[broken.task()])
def test_broken(hud_result):
    pass
"""
    )
    # one of three attempted episodes errored: below the default 95% coverage the gate
    # would have no verdict; at 60% it judges (and clears), and the error still fails
    result = run(suite, "--hud-min-success=0.5", "--hud-min-coverage=0.6")
    assert result.ret == 1
    out = result.stdout.str()
    assert "PASSED overall: success rate 50.0% (1/2)" in out
    assert "FAILED errors: 1 rollout errors always fail the session, gates or not" in out


def test_strict_xpass_fails_and_is_not_a_graded_success(suite) -> None:
    suite.makepyfile(
        test_x="""
import pytest
from line_env import reach

@pytest.mark.hud(tasks=[reach.task(goal=0.0, seed=1), reach.task(goal=5.0, seed=2)])
def test_plain(hud_result):
    assert hud_result.success

@pytest.mark.hud_expect(xfail={"line/*": "expected to fail"})
@pytest.mark.hud(tasks=[reach.task(goal=0.0, seed=7)])
def test_expected(hud_result):
    assert hud_result.success
"""
    )
    result = run(suite, "--hud-min-success=0.5", "--hud-results=r.json")
    assert result.ret == 1
    out = result.stdout.str()
    assert "PASSED overall: success rate 50.0% (1/2)" in out  # not 2/3: the XPASS is no grade
    assert "1 strict XPASS always fail the session" in out
    doc = json.loads((suite.path / "r.json").read_text())
    assert doc["overall"]["xpassed"] == 1


def test_report_only_records_a_baseline_with_exit_0(suite) -> None:
    suite.makepyfile(test_gated=GATED.replace("min_success=0.0", "min_success=0.9"))
    suite.path.joinpath("rows.jsonl").write_text(UNGATED_ROWS)
    result = run(suite, "--hud-results=base.json", "--hud-gate=none")
    assert result.ret == 0
    out = result.stdout.str()
    assert "(not enforced) FAILED" not in out and "PASSED (not enforced) test_gated.py" in out
    assert "report only (--hud-gate=none): 2 episode failures not gated" in out
    doc = json.loads((suite.path / "base.json").read_text())
    assert doc["complete"] is True and doc["interrupted"] is False
    # the README's PR step against it: same run, same rates, so within chance
    compare = run(suite, "--hud-baseline=base.json")
    assert "PASSED baseline overall: 33% -> 33%" in compare.stdout.str()
    suite.makepyfile(
        test_broken="""
import pytest
from line_env import broken

@pytest.mark.hud(tasks=[broken.task()])
def test_broken(hud_result):
    pass
"""
    )
    assert run(suite, "--hud-gate=none").ret == 1  # ERRORs still fail a report-only run


def test_baseline_from_another_run_is_named_and_strict_fails(suite) -> None:
    suite.makepyfile(test_gated=GATED)
    assert run(suite, "--hud-results=base.json").ret == 0
    warned = run(suite, "--hud-baseline=base.json", "--hud-group=2")
    assert "(baseline differs: group 1 -> 2" in warned.stdout.str()
    assert warned.ret == 0
    strict = run(suite, "--hud-baseline=base.json", "--hud-group=2", "--hud-baseline-strict")
    assert strict.ret == 1
    assert "FAILED baseline provenance: expected the baseline's run to match" in (
        strict.stdout.str()
    )


def test_baseline_gate_says_what_it_can_detect(suite) -> None:
    suite.makepyfile(test_gated=GATED)
    assert run(suite, "--hud-results=base.json").ret == 0
    result = run(suite, "--hud-baseline=base.json")
    assert re.search(
        r"baseline line/reach: 50% -> 50% \(p=1\.000; n=2 vs 2: cannot detect any drop; "
        r"for 10 pp record and run with --hud-group=\d+ \(\d+ episodes per arm\)\)",
        result.stdout.str(),
    )


def test_interrupted_run_is_marked_and_refused_as_baseline(suite) -> None:
    rows = ", ".join(f"reach.task(goal=0.0, seed={s})" for s in range(40))
    suite.makepyfile(
        test_slow=f"""
import time
import pytest
from line_env import reach

@pytest.mark.hud(tasks=[{rows}])
def test_slow(hud_result):
    with open("progress.txt", "a") as f:
        f.write("x")
    time.sleep(0.5)
"""
    )
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--hud-results=r.json"]
    proc = suite.popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )
    progress = suite.path / "progress.txt"
    try:
        for _ in range(2400):  # bounded: at most ~240 s for two items to start
            if progress.exists() and len(progress.read_text()) >= 2:
                break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 2, out.decode()[-2000:]
    doc = json.loads((suite.path / "r.json").read_text())
    assert doc["complete"] is False and doc["interrupted"] is True
    assert doc["items"]["collected"] == 40 and 1 <= doc["items"]["run"] < 40
    refused = run(suite, "--hud-baseline=r.json", "--collect-only")
    assert refused.ret == 4
    assert "expected a complete run, got an incomplete one (it was interrupted" in (
        refused.stderr.str()
    )
    forced = run(suite, "--hud-baseline=r.json", "--hud-baseline-force", "--collect-only")
    assert forced.ret == 0


def test_ids_are_readable_and_one_name_everywhere(suite) -> None:
    suite.path.joinpath("rows.jsonl").write_text(
        UNGATED_ROWS + '{"env": "line", "id": "reach", "args": {"goal": 0, "seed": [1, 2]}}\n'
    )
    result = run(suite, "rows.jsonl", "-v", "--hud-group=2")
    out = result.stdout.str()
    assert "rows.jsonl::test_episode[line/reach[goal:5][seed:3][1]] FAILED" in out
    assert "episode failed: line/reach[goal:5][seed:3][1]: success=False" in out
    # an arg it cannot show (a list) is one hash, the others stay readable
    assert re.search(r"test_episode\[line/reach\[goal:0\]\[\+[0-9a-f]{8}\]\[0\]\] PASSED", out)
    ids = [run(suite, "rows.jsonl", "--hud-group=2", "--collect-only", "-q") for _ in (0, 1)]
    first, second = ([line for line in r.outlines if "::" in line] for r in ids)
    assert first == second and len(first) == 4  # stable across runs
    assert "rows.jsonl::test_episode[line/reach[goal:5][seed:3][0]]" in first


def test_group_keeps_the_row_seed_and_args(suite) -> None:
    suite.path.joinpath("rows.jsonl").write_text(UNGATED_ROWS)
    result = run(suite, "rows.jsonl", "--hud-group=3", "--hud-seed=7", "--hud-results=r.json")
    result.assert_outcomes(failed=3)
    rows = sorted(
        json.loads((suite.path / "r.json").read_text())["rollouts"], key=lambda r: r["rep"]
    )
    assert rows[0]["seed"] == 3  # repeat 0 runs the row's own seed, even with --hud-seed
    assert len({r["seed"] for r in rows}) == 3  # the repeats vary it
    assert all(r["args"]["goal"] == 5 for r in rows)  # and only it


def test_per_task_aggregates_across_seeds_and_counts_xfail_skip(suite) -> None:
    rows = ", ".join(f"reach.task(goal={g}, seed={s})" for s in range(3) for g in (0.0, 9.0))
    suite.makepyfile(
        test_agg=f"""
import pytest
from line_env import reach

@pytest.mark.hud(tasks=[{rows}], min_success=0.0)
def test_agg(hud_result):
    assert hud_result.success

@pytest.mark.hud_expect(xfail={{"line/*": "far"}})
@pytest.mark.hud(tasks=[reach.task(goal=9.0, seed=1)])
def test_xf(hud_result):
    assert hud_result.success

@pytest.mark.hud_expect(skip={{"line/*": "not today"}})
@pytest.mark.hud(tasks=[reach.task(goal=9.0, seed=2)])
def test_sk(hud_result):
    assert hud_result.success
"""
    )
    result = run(suite, "--hud-results=r.json", "--hud-group=2")
    doc = json.loads((suite.path / "r.json").read_text())
    task = doc["per_task"]["line/reach"]
    assert list(doc["per_task"]) == ["line/reach"]
    assert task["episodes"] == 14 and task["successes"] == 6  # 7 rows x 2 repeats ran
    assert task["xfailed"] == 2 and task["skipped"] == 2
    assert len(doc["rollouts"]) == 16
    assert set(doc["per_group"]) == {f"test_agg.py::test_{n}" for n in ("agg", "xf", "sk")}
    table = result.stdout.str()
    assert re.search(r"^  reach\s+14\s+43%.*\s2\s+0\s+2$", table, re.M)
    assert re.search(r"^test_agg.py::test_xf\s+2\s+0%.*\s2\s+0\s+0$", table, re.M)
    assert re.search(r"^test_agg.py::test_sk\s+0\s+-.*\s0\s+0\s+2$", table, re.M)


def test_detectable_drop_matches_the_gates_own_test_by_simulation() -> None:
    """The "detects drops >= X" promise, checked against the two-proportion test the gate
    runs: at the computed size, a 10 pp drop is flagged in about 80% of simulated runs."""
    import numpy as np

    from pytest_hud.evaluation.baseline import detectable_drop, episodes_for_drop
    from pytest_hud.evaluation.proportions import two_proportion_drop

    n = episodes_for_drop(0.5, 0.10)
    assert n is not None and detectable_drop(0.5, n, n) == pytest.approx(0.10)
    small = detectable_drop(0.5, 13, 13)
    assert small is not None and small > 0.3  # 13 episodes per arm see only big drops
    rng = np.random.default_rng(0)
    base, now = rng.binomial(n, 0.5, 2000), rng.binomial(n, 0.4, 2000)
    pairs = zip(base.tolist(), now.tolist(), strict=True)
    hits = sum(two_proportion_drop(b, n, c, n) < 0.05 for b, c in pairs)
    assert 0.75 <= hits / 2000 <= 0.86
