"""Issue 12, the plugin's side: sessions that survive mass errors, lost workers, interrupts,
wedged model threads and hostile task rows (each run in a pytest subprocess, pytester)."""

from __future__ import annotations

import json

import pytest

SOAK_ITEMS = 400

FAILING_ENV = """
from pytest_hud import Environment

env = Environment("broken")


def _deep(n):
    if n == 0:
        raise ValueError("the env refuses to start: " + "x" * (n + 3))
    return _deep(n - 1) + 1


@env.template()
async def boom(seed: int = 0):
    _deep(5)
    yield {"prompt": "never"}
    yield {"score": 0}
"""

#: Records every ast.parse called off the main thread (the race of issue 12 #2).
AST_PROBE = """
import ast, os, threading

import broken_env  # noqa: F401

_parse = ast.parse
OFF_MAIN = []


def _probe(*args, **kwargs):
    if threading.current_thread() is not threading.main_thread():
        OFF_MAIN.append(threading.current_thread().name)
    return _parse(*args, **kwargs)


ast.parse = _probe


def pytest_sessionfinish(session):
    with open(os.environ["AST_PROBE_OUT"], "w") as fh:
        fh.write(str(len(OFF_MAIN)) + " " + ",".join(sorted(set(OFF_MAIN))))
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=600)


def test_soak_of_hundreds_of_erroring_items_finishes_with_exact_counts(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 12 #2: 1,360 erroring items ended in INTERNALERROR (SystemError: AST
    constructor recursion depth mismatch) after 143-298 items: the loop thread formatted
    tracebacks (ast.parse for the carets) while pytest's main thread parsed source.
    Tracebacks made off the main thread no longer call ast.parse (before: one call per
    frame line on pytest-hud-loop), and several hundred erroring items end with exact
    counts. Zero agent, local runtime, a shared substrate: cheap enough for CI."""
    pytester.makepyfile(broken_env=FAILING_ENV)
    pytester.makeconftest(AST_PROBE)
    pytester.path.joinpath("rows.jsonl").write_text('{"env": "broken", "id": "boom"}\n')
    probe = pytester.path / "ast_probe.txt"
    monkeypatch.setenv("AST_PROBE_OUT", str(probe))
    result = run(
        pytester,
        "rows.jsonl",
        f"--hud-group={SOAK_ITEMS}",
        "--hud-agent=zero",
        "--hud-concurrency=8",
        "--hud-runtime=local",
        "--hud-shared=8",
        "--hud-results=results.json",
        "-q",
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(errors=SOAK_ITEMS)
    assert result.ret == 1
    rows = json.loads((pytester.path / "results.json").read_text())["rollouts"]
    assert len(rows) == SOAK_ITEMS
    assert all(r["error_type"] == "ControlError" and r["phase"] == "start" for r in rows)
    count, _, threads = probe.read_text().partition(" ")
    assert int(count) == 0, f"ast.parse ran off the main thread on {threads}"
