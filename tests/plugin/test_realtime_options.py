"""--hud-realtime and --hud-latency (features/realtime.py) through pytest: the timed loop's
counters reach the results JSON; bad values are usage errors that name the fix."""

from __future__ import annotations

import json

import pytest
from line_suite import TESTS, run


def rows(pytester: pytest.Pytester, *args: str) -> list[dict]:
    pytester.makepyfile(test_line=TESTS)
    out = pytester.path / "results.json"
    result = run(pytester, "-k", "reach", f"--hud-results={out}", *args)
    assert result.ret == 1, result.stdout.str()  # goal 5 fails, as in lockstep
    return json.loads(out.read_text())["rollouts"]


def test_latency_reports_its_counters_per_row(suite) -> None:
    found = rows(suite, "--hud-latency=100")
    assert [r["success"] for r in found] == [True, False]
    for row in found:
        timing = row["timing"]
        assert timing["mode"] == "latency" and timing["delay_ticks"] == 2
        assert timing["ticks"] == 3


def test_realtime_reports_its_counters_and_header(suite) -> None:
    suite.makepyfile(test_line=TESTS)
    result = run(suite, "-k", "reach", "--hud-realtime", "--hud-results=r.json")
    result.stdout.fnmatch_lines(["*hud: timed control loop in real time*"])
    found = json.loads((suite.path / "r.json").read_text())["rollouts"]
    for row in found:
        timing = row["timing"]
        assert timing["mode"] == "realtime" and timing["rate_hz"] == 20
        assert {"late_ms_p99", "deadline_misses", "held_steps"} <= set(timing)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hud-latency=-5"], "*--hud-latency takes a number >= 0, got '-5'*"),
        (["--hud-latency=soon"], "*--hud-latency takes a number >= 0, got 'soon'*"),
        (["--hud-realtime", "--hud-latency=10"], "*two clocks*pass one of them*"),
        (["--hud-rate=30"], "*--hud-rate sets the timed loop's rate; add --hud-realtime*"),
        (["--hud-realtime", "--hud-rate=0"], "*--hud-rate takes a number > 0, got '0'*"),
    ],
)
def test_bad_values_are_usage_errors(suite, args: list[str], message: str) -> None:
    suite.makepyfile(test_line=TESTS)
    result = run(suite, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
