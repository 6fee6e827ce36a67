"""bench/stats.py --study (issue 41) at a tiny size: every part runs on the project's classes,
the valid tests' type-I error estimates stay under alpha plus three Monte-Carlo standard
errors, and the naive procedures the study shows exceeding alpha do so here too. The full
size and its figures are docs/performance.md's (bench:stats-study); no wall-clock assertion."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from paths import ROOT


def load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


stats = load("bench_stats", ROOT / "bench" / "stats.py")
report = load("bench_report", ROOT / "bench" / "_report.py")


@pytest.fixture(scope="module")
def sections() -> dict[str, Any]:
    size = stats.Size(runs=300, slow=40)
    return {
        name: part(np.random.default_rng([41, i]), size)
        for i, (name, part) in enumerate(stats.SECTIONS.items())
    }


def test_every_part_fills_its_tables(sections: dict[str, Any]) -> None:
    assert set(sections) == {"typeone", "tasks", "power-binary", "power-scores", "example"}
    for section in sections.values():
        for table in section.tables:
            assert table.rows and table.note
            assert all(len(row) == len(table.head) for row in table.rows), table.title


def test_valid_tests_stay_under_alpha_plus_three_standard_errors(
    sections: dict[str, Any],
) -> None:
    checks = [c for s in sections.values() for c in s.checks]
    valid = [c for c in checks if c.valid]
    assert len(valid) >= 25 and all(c.share.n >= 40 for c in valid)
    over = [f"{c.data}: {c.test} {c.share.cell()} (level {c.level})" for c in valid if not c.within]
    assert not over, over


def test_the_naive_procedures_exceed_alpha(sections: dict[str, Any]) -> None:
    """Reading a fixed-n test after every pair, and taking a row's repeats as units, both
    exceed alpha by far more than three standard errors at 300 sessions."""
    naive = {c.test: c for c in sections["typeone"].checks if not c.valid}
    for test in (
        "naive: exact McNemar read after every pair, stop at p < alpha",
        "naive: exact McNemar on episodes as units",
    ):
        assert naive[test].share.n == 300 and not naive[test].within, naive[test]


def test_the_inspect_style_eprocess_decides_the_obvious() -> None:
    """Our reading of Inspect Robots' e-process: every scene won crosses 1/alpha within a
    handful of scenes on the candidate's side, a tie never does."""
    x = np.vstack([np.ones(30), -np.ones(30), np.zeros(30)])
    crossed, side = stats.inspect_eprocess(x)
    assert 0 < crossed[0] <= 12 and side[0] == 1
    assert 0 < crossed[1] <= 12 and side[1] == -1
    assert crossed[2] == 0


def test_the_study_writes_one_block_of_tables(tmp_path: Path, sections: dict[str, Any]) -> None:
    page = tmp_path / "performance.md"
    page.write_text("# Performance\n")
    tables = [(t.title, t.head, t.rows, t.note) for s in sections.values() for t in s.tables]
    for _ in range(2):  # written again, replaced
        report.write_tables("stats-study", "Statistics", tables, argv=["bench/stats.py"], path=page)
    text = page.read_text()
    assert text.count("<!-- bench:stats-study -->") == 1 and text.count("### Statistics") == 1
    assert text.count("#### ") == len(tables)
