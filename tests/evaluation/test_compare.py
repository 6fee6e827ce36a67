"""Checkpoint comparison on synthetic results JSONs written by the plugin's own
``results_document``: verdicts, exact p-values against scipy, Newcombe intervals against
the published example, the PNG's bars, and the command line's exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import binomtest, fisher_exact

from pytest_hud.evaluation import comparison as C
from pytest_hud.evaluation.comparison import figure, write_plot
from pytest_hud.evaluation.proportions import fisher_exact as our_fisher
from pytest_hud.evaluation.proportions import mcnemar_exact, newcombe_paired, newcombe_unpaired
from pytest_hud.evaluation.results import results_document

ROOT = Path(__file__).resolve().parents[2]


def rows(task: str, outcomes: list[bool], seeds: list[int], **args: Any) -> list[dict[str, Any]]:
    env, template = task.split("/")
    out = []
    for ok, seed in zip(outcomes, seeds, strict=True):
        out.append({"nodeid": f"t.py::test[{task}-{seed}]", "group": "t.py::test",
                    "key": f"{task}-{seed}", "env": env, "task_id": template,
                    "args": {"seed": seed, **args}, "rep": 0, "seed": seed, "agent": "a",
                    "outcome": "passed" if ok else "failed", "score": float(ok),
                    "success": ok, "steps": 5, "duration": 0.1, "error": None})  # fmt: skip
    return out


def write(path: Path, all_rows: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(results_document(all_rows, meta={"agent": "a"}, gates=[])))
    return path


def k_of(k: int, n: int) -> list[bool]:
    return [i < k for i in range(n)]


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    base = write(tmp_path / "base.json", [
        *rows("pusht/drop", k_of(18, 20), list(range(20))),
        *rows("pusht/same", k_of(10, 20), list(range(20))),
        *rows("aloha/rise", k_of(2, 20), list(range(20))),
        *rows("aloha/gone", k_of(5, 10), list(range(10))),
    ])  # fmt: skip
    new = write(tmp_path / "new.json", [
        *rows("pusht/drop", k_of(4, 20), list(range(100, 120))),  # other seeds: unpaired
        *rows("pusht/same", k_of(11, 20), list(range(100, 120))),
        *rows("aloha/rise", k_of(19, 20), list(range(100, 120))),
    ])  # fmt: skip
    return base, new


def test_verdicts_and_fisher_p_values_per_task(two_runs: tuple[Path, Path]) -> None:
    got = {c.task: c for c in C.compare([C.load_run(p) for p in two_runs])}
    assert got["pusht/drop"].verdict == "worse" and got["pusht/drop"].test == "fisher"
    assert got["pusht/same"].verdict == "no significant change"
    assert got["aloha/rise"].verdict == "better"
    assert got["aloha/gone"].verdict == "missing" and got["aloha/gone"].new_n == 0
    assert got["pusht/drop"].p_value == pytest.approx(
        fisher_exact([[18, 2], [4, 16]]).pvalue, rel=1e-9
    )
    assert got["pusht/drop"].diff == pytest.approx(-0.7)
    lo, hi = got["pusht/drop"].diff_ci
    assert lo < -0.7 < hi < 0
    overall = got["overall"]
    assert (overall.base_successes, overall.base_n) == (35, 70)
    assert (overall.new_successes, overall.new_n) == (34, 60)


def test_matching_seeds_are_paired_with_exact_mcnemar(tmp_path: Path) -> None:
    seeds = list(range(30))
    base_ok = [s % 3 != 0 for s in seeds]  # 20 of 30
    new_ok = [s % 3 != 0 and s % 5 != 0 for s in seeds]  # loses seeds 5, 10, 20, 25 ...
    base = write(tmp_path / "b.json", rows("e/t", base_ok, seeds))
    new = write(tmp_path / "n.json", rows("e/t", new_ok, seeds))
    (c, _) = C.compare([C.load_run(base), C.load_run(new)])
    b = sum(x and not y for x, y in zip(base_ok, new_ok, strict=True))
    cc = sum(y and not x for x, y in zip(base_ok, new_ok, strict=True))
    assert c.test == "mcnemar" and (b, cc) == (4, 0)
    assert c.p_value == pytest.approx(binomtest(b, b + cc, 0.5).pvalue, rel=1e-12)
    assert c.verdict == "no significant change"  # 4 discordant pairs: p = 0.125
    # Fisher would have said the same about 20/30 vs 16/30, McNemar is the sharper test
    assert c.p_value < our_fisher(20, 30, 16, 30)


def test_rows_with_other_args_are_other_tasks_errors_are_not_episodes(tmp_path: Path) -> None:
    r = [*rows("e/t", [True, False], [1, 2], level=1), *rows("e/t", [True], [1], level=2)]
    r.append({**r[0], "seed": 9, "args": {"seed": 9, "level": 1}, "error": "boom",
              "success": None})  # fmt: skip
    run = C.load_run(write(tmp_path / "r.json", r))
    assert run.tasks.keys() == {"e/t[level=1]", "e/t[level=2]"}
    assert run.counts("e/t[level=1]") == (1, 2)


def test_exact_p_values_match_scipy() -> None:
    for s1, n1, s2, n2 in [(0, 5, 5, 5), (3, 10, 7, 12), (18, 20, 4, 20), (50, 97, 61, 103)]:
        want = fisher_exact([[s1, n1 - s1], [s2, n2 - s2]]).pvalue
        assert our_fisher(s1, n1, s2, n2) == pytest.approx(want, rel=1e-9)
    for b, c in [(0, 3), (4, 0), (7, 9), (1, 12), (25, 40)]:
        assert mcnemar_exact(b, c) == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-9)
    assert mcnemar_exact(0, 0) == 1.0 and our_fisher(0, 0, 3, 4) == 1.0
    with pytest.raises(ValueError, match="successes"):
        our_fisher(5, 4, 1, 2)


def test_newcombe_intervals() -> None:
    # Newcombe (1998), Stat. Med. 17:873, example 56/70 vs 48/80: method 10 gives
    # 0.0524 to 0.3339 for the difference 0.2
    lo, hi = newcombe_unpaired(48, 80, 56, 70)
    assert (round(lo, 4), round(hi, 4)) == (0.0524, 0.3339)
    # with no correlation between the pairs (ad == bc) the paired interval is the
    # unpaired one on the same margins
    assert newcombe_paired(4, 2, 2, 1) == pytest.approx(newcombe_unpaired(6, 9, 6, 9))
    lo, hi = newcombe_paired(30, 10, 2, 8)  # positively correlated pairs: narrower
    u_lo, u_hi = newcombe_unpaired(40, 50, 32, 50)
    assert lo < -0.16 < hi and hi - lo < u_hi - u_lo


def test_plot_has_one_bar_per_task_and_run(tmp_path: Path, two_runs: tuple[Path, Path]) -> None:
    runs = [C.load_run(p) for p in two_runs]
    out = tmp_path / "cmp.png"
    assert write_plot(runs, out) == 4 * 2
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig = figure(runs)
    assert len(fig.axes) == 1
    assert len(fig.axes[0].patches) == 8
    third = C.Run("third", None, runs[1].tasks)
    fig3 = figure([*runs, third])
    assert len(fig3.axes) == 2  # + success vs run index
    assert len(fig3.axes[0].patches) == 12
    assert len(fig3.axes[1].lines) >= 4  # one per task (+ the pooled error bar line)
    assert fig3.axes[1].get_xlabel() == "run (in the order given)"
    # results files named by training step: the runs sit at their steps
    steps = [C.Run(str(s), None, runs[i % 2].tasks) for i, s in enumerate((0, 500, 2000))]
    trend = figure(steps).axes[1]
    assert trend.get_xlabel() == "training step"
    assert list(trend.get_xticks()) == [0, 500, 2000]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_hud", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, check=False)  # fmt: skip


def test_cli_table_plot_and_fail_on_drop(tmp_path: Path, two_runs: tuple[Path, Path]) -> None:
    base, new = map(str, two_runs)
    plot = tmp_path / "c.png"
    done = _cli("compare", base, new, "--plot", str(plot), "--json", str(tmp_path / "c.json"))
    assert done.returncode == 0, done.stderr
    assert "base -> new" in done.stdout and "pusht/drop" in done.stdout
    assert plot.is_file() and len(json.loads((tmp_path / "c.json").read_text())) == 5
    failed = _cli("compare", base, new, "--fail-on-drop", "50")
    assert failed.returncode == 1 and "FAILED pusht/drop" in failed.stderr
    assert _cli("compare", base, new, "--fail-on-drop", "75").returncode == 0  # 70 < 75
    assert _cli("compare", base).returncode == 2
    missing = _cli("compare", base, str(tmp_path / "nope.json"))  # a file it cannot read: 4
    assert missing.returncode == 4 and "nope.json" in missing.stderr
    assert _cli("frobnicate").returncode == 2


def test_plot_takes_all_and_nothing(tmp_path: Path) -> None:
    """0/4 and 4/4 tasks: Wilson's upper bound for 4/4 is a hair below 1 in floating
    point, and the negative error-bar length made matplotlib refuse the plot."""
    both = [*rows("mw/none", k_of(0, 4), list(range(4))), *rows("mw/all", k_of(4, 4), [0, 1, 2, 3])]
    runs = [C.load_run(write(tmp_path / f"{i}.json", both), str(i)) for i in range(3)]
    assert write_plot(runs, tmp_path / "edge.png") == 2 * 3


def test_repeats_of_a_row_pool_into_one_unit(tmp_path: Path) -> None:
    """Four rows run three times each, lost by the base and won by the new run: twelve
    discordant episodes would give McNemar p = 2/2^12, but they are four rows, and four
    rows cannot reach p < 0.125. With one episode per row the pairs stay McNemar's."""

    def repeated(ok: bool) -> list[dict[str, Any]]:
        out = []
        for row in range(4):
            for rep in range(3):
                (r,) = rows("e/t", [ok], [100 * row + rep])
                r.update(key=f"e/t-{row}", rep=rep)
                out.append(r)
        return out

    base = C.load_run(write(tmp_path / "base.json", repeated(False)))
    new = C.load_run(write(tmp_path / "new.json", repeated(True)))
    task, overall = C.compare([base, new])
    assert task.test == overall.test == "rows (permutation)"
    assert task.p_value == pytest.approx(2 / 2**4) and task.verdict == "no significant change"
    assert task.diff_ci[0] <= 0.0 <= task.diff_ci[1]  # the interval agrees: 0 is kept
    once = C.compare(
        [
            C.load_run(write(tmp_path / "b1.json", rows("e/t", [False] * 12, list(range(12))))),
            C.load_run(write(tmp_path / "n1.json", rows("e/t", [True] * 12, list(range(12))))),
        ]
    )
    assert once[0].test == "mcnemar" and once[0].verdict == "better"
