"""The options of the evaluation features: sequential gates' alpha, the episode ledger and
resume, and the comparison with a previous run (kept apart from ``options.py`` so each
feature's flags live with the feature)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_hud._plugin.option_table import OptionTable, read_option

__all__ = ["EVALUATION_OPTIONS", "EvaluationOptions"]

EVALUATION_OPTIONS: OptionTable = [
    (
        "--hud-alpha",
        "error level of --hud-gate=sequential decisions and --hud-compare verdicts (default 0.05)",
        {"type": float},
    ),
    (
        "--hud-min-coverage",
        "no gate or A/B verdict when fewer than this share of the attempted episodes were "
        "scored (errors are not scored; default 0.95): the gate fails naming the errored rows",
        {"type": float},
    ),
    (
        "--hud-ledger",
        "append every finished rollout (fsync'd behind) to this JSONL episode ledger, with the "
        "run's provenance (default: <results>.ledger.jsonl beside --hud-results)",
        {},
    ),
    (
        "--hud-resume",
        "a ledger of an earlier (killed) run: items whose episodes it holds are reported "
        "from it instead of run again",
        {},
    ),
    (
        "--hud-compare",
        "a previous results JSON: compare this run with it per task (table, PNG plot)",
        {},
    ),
    (
        "--hud-compare-fail",
        "fail the session when a task dropped significantly by at least DROP points",
        {"type": float},
    ),
]


@dataclass
class EvaluationOptions:
    alpha: float = 0.05
    min_coverage: float = 0.95
    ledger: Path | None = None
    resume: Path | None = None
    compare: Path | None = None
    compare_fail: float | None = None

    def read_evaluation(self, config: pytest.Config) -> None:
        for name, kind in [("alpha", float), ("min_coverage", float), ("compare_fail", float)]:
            value = read_option(config, f"hud_{name}", kind)
            if value is not None:
                setattr(self, name, value)
        for name in ("ledger", "resume", "compare"):
            path = read_option(config, f"hud_{name}", str)
            if path is not None:
                setattr(self, name, Path(path))
        results = getattr(self, "results", None)
        if self.ledger is None and results is not None:
            self.ledger = results.with_suffix(".ledger.jsonl")

    def validate_evaluation(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise pytest.UsageError(f"--hud-alpha is a level in (0, 1), got {self.alpha}")
        if not 0.0 <= self.min_coverage <= 1.0:
            raise pytest.UsageError(
                f"--hud-min-coverage is a share of episodes in [0, 1], got {self.min_coverage}"
            )
        for name in ("resume", "compare"):
            path = getattr(self, name)
            if path is not None and not path.exists():
                raise pytest.UsageError(
                    f"--hud-{name}: {path} does not exist; fix: pass the "
                    + ("ledger of the earlier run" if name == "resume" else "results JSON")
                )
        if self.compare_fail is not None and self.compare is None:
            raise pytest.UsageError(
                "--hud-compare-fail needs --hud-compare=RESULTS.json to compare against"
            )
        if self.compare_fail is not None and self.compare_fail < 0:
            raise pytest.UsageError(
                f"--hud-compare-fail is a drop in percentage points >= 0, got {self.compare_fail}"
            )
