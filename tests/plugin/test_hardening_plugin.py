"""Issue 12, the plugin's side: sessions that survive mass errors, lost workers, interrupts,
wedged model threads and hostile task rows (each run in a pytest subprocess, pytester)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_hud.plumbing.process import child_env

REPO = Path(__file__).resolve().parents[2]

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
    # the template's own exception type travels back (issue 11: errors the user can act on)
    assert all(r["error"] is not None and r["phase"] == "start" for r in rows)
    assert {r["error_type"] for r in rows} == {rows[0]["error_type"]}
    count, _, threads = probe.read_text().partition(" ")
    assert int(count) == 0, f"ast.parse ran off the main thread on {threads}"


#: A row whose rollout kills its own xdist worker (the worker, not the env server: the
#: template runs in-process under --hud-runtime=local).
KILLER_ENV = """
import os, signal
from pytest_hud import Environment

env = Environment("killer")


@env.template()
async def fine(n: int = 0):
    yield {"prompt": "fine"}
    yield {"score": 1.0, "success": True}


@env.template()
async def die(n: int = 0):
    os.kill(os.getpid(), signal.SIGKILL)
    yield {"prompt": "never"}
    yield {"score": 0}
"""


#: An agent that needs no robot capability: the templates above grade on their own.
PLAIN_AGENT = """
async def _act(run):
    return {}


def plain():
    return _act
"""


def test_a_killed_xdist_worker_leaves_an_error_row_in_table_json_and_gates(
    pytester: pytest.Pytester,
) -> None:
    """Issue 12 #6: a worker killed under an item: xdist said FAILED, the hud table and the
    results JSON had 10 of 11 rows (errors 0) and the gates never saw it. Now the item is
    an ERROR with a row: phase "worker", the worker's id and the signal."""
    pytester.makepyfile(killer_env=KILLER_ENV, plain_agent=PLAIN_AGENT)
    pytester.makeconftest("import killer_env  # noqa: F401\n")
    rows = [json.dumps({"env": "killer", "id": "fine", "args": {"n": n}}) for n in range(10)]
    rows.insert(5, json.dumps({"env": "killer", "id": "die"}))
    pytester.path.joinpath("rows.jsonl").write_text("\n".join(rows) + "\n")
    result = run(
        pytester,
        "rows.jsonl",
        "-n",
        "2",
        "--hud-agent=plain_agent:plain",
        "--hud-runtime=local",
        "--hud-min-success=0.5",
        "--hud-results=results.json",
    )
    result.assert_outcomes(passed=10, errors=1)
    assert result.ret == 1  # the gate passes (10/10 graded), the lost item still fails it
    doc = json.loads((pytester.path / "results.json").read_text())
    assert len(doc["rollouts"]) == 11
    (lost,) = [r for r in doc["rollouts"] if r["error"] is not None]
    assert lost["phase"] == "worker" and lost["outcome"] == "error"
    assert lost["key"] == "killer/die" and lost["worker"] in ("gw0", "gw1")
    assert "was killed by signal SIGKILL (9)" in lost["error"]
    assert doc["overall"]["errors"] == 1
    table = result.stdout.str()
    assert "killer/die" in table.split("hud:", 1)[1]


WEDGED_AGENT = """
import threading
from pytest_hud.robot import RobotAgent
from pytest_hud.robot.agent.model import Model


class Wedged(Model):
    def infer(self, batch):
        threading.Event().wait()  # a forward that never returns


def wedged():
    return RobotAgent(Wedged(), name="wedged")
"""


@pytest.mark.parametrize("xdist", [[], ["-n", "1"]], ids=["in-process", "xdist"])
def test_an_abandoned_model_thread_is_named_in_the_summary(
    pytester: pytest.Pytester, xdist: list[str]
) -> None:
    """Issue 12 #8 (plugin side): a rollout timed out on a wedged forward; the session
    exits, and the summary now says which model thread it left behind, in what, for how
    long (before: nothing said so)."""
    from line_suite import ENV

    pytester.makepyfile(line_env=ENV, wedged_agent=WEDGED_AGENT)
    pytester.makeconftest("import line_env  # noqa: F401\n")
    pytester.path.joinpath("rows.jsonl").write_text('{"env": "line", "id": "reach"}\n')
    result = run(
        pytester, "rows.jsonl", "--hud-agent=wedged_agent:wedged", "--hud-timeout=5", *xdist
    )
    result.assert_outcomes(errors=1)
    where = r" \(on gw0\)" if xdist else ""
    result.stdout.re_match_lines(
        [rf"model thread pytest-hud-model_\d+{where} abandoned in Wedged\.infer after \d+ s"]
    )


EVIL = """
import pathlib
pathlib.Path(__file__).with_name("ran.txt").write_text("imported")
from pytest_hud import Environment
env = Environment("evil")


@env.template()
async def t():
    yield {"prompt": "x"}
    yield {"score": 1.0, "success": True}
"""


def test_a_module_column_outside_the_project_is_refused_unless_allowed(
    pytester: pytest.Pytester,
) -> None:
    """Issue 12 #13: {"module": "../elsewhere/evil.py"} imported and ran the file. Now it
    is a usage error naming the row, the path and the flag, and the file never runs;
    --hud-allow-modules imports it; dotted names and paths in the project still work."""
    elsewhere = pytester.path.parent / f"{pytester.path.name}-elsewhere"
    elsewhere.mkdir()
    (elsewhere / "evil.py").write_text(EVIL)
    project = pytester.path / "proj"
    project.mkdir()
    (project / "rows.jsonl").write_text(
        json.dumps({"env": "evil", "id": "t", "module": f"../{elsewhere.name}/evil.py"}) + "\n"
    )
    pytester.makepyfile(plain_agent=PLAIN_AGENT)
    refused = run(pytester, "proj/rows.jsonl", "--hud-agent=plain_agent:plain")
    text = refused.stdout.str() + refused.stderr.str()
    assert refused.ret == pytest.ExitCode.INTERRUPTED, text  # a collection error
    assert "row 1 (evil/t)" in text and f"../{elsewhere.name}/evil.py" in text
    assert "--hud-allow-modules" in text
    assert not (elsewhere / "ran.txt").exists()

    allowed = run(
        pytester, "proj/rows.jsonl", "--hud-agent=plain_agent:plain", "--hud-allow-modules"
    )
    allowed.assert_outcomes(passed=1)
    assert (elsewhere / "ran.txt").read_text() == "imported"

    (elsewhere / "ran.txt").unlink()
    (project / "inside.py").write_text(EVIL.replace('"evil"', '"inside"'))
    pytester.makepyfile(dotted_env=EVIL.replace('"evil"', '"dotted"'))
    (project / "rows.jsonl").write_text(
        json.dumps({"env": "inside", "id": "t", "module": "proj/inside.py"})
        + "\n"
        + json.dumps({"env": "dotted", "id": "t", "module": "dotted_env"})
        + "\n"
    )
    run(pytester, "proj/rows.jsonl", "--hud-agent=plain_agent:plain").assert_outcomes(passed=2)


def test_a_relative_module_column_is_read_from_the_task_files_folder(
    pytester: pytest.Pytester,
) -> None:
    """A new user's trial: {"module": "envs/inside.py"} in suite/rows.jsonl ran only from
    suite/ (the path was read from the current directory: from the project root the row
    ERRORed with "env module .../envs/inside.py does not exist")."""
    suite = pytester.path / "suite"
    (suite / "envs").mkdir(parents=True)
    (suite / "envs" / "inside.py").write_text(EVIL.replace('"evil"', '"inside"'))
    row = {"env": "inside", "id": "t", "module": "envs/inside.py"}
    (suite / "rows.jsonl").write_text(json.dumps(row) + "\n")
    (suite / "rows.tasks.json").write_text(json.dumps([row]))
    pytester.makepyfile(plain_agent=PLAIN_AGENT)
    result = run(pytester, "suite", "--hud-agent=plain_agent:plain", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    assert (suite / "envs" / "ran.txt").read_text() == "imported"


def test_a_refused_module_column_names_each_allowed_folder_once(tmp_path: Path) -> None:
    """Issue 26 #6: a task file in the rootdir gave "outside DIR and DIR and DIR"."""
    from pytest_hud import Task
    from pytest_hud._plugin.module_rows import check_module_columns
    from pytest_hud.errors import ModuleColumnError

    row = Task(env="evil", id="t", metadata={"module": "/elsewhere/evil.py"})
    with pytest.raises(ModuleColumnError) as err:
        check_module_columns([row], "rows.jsonl", [tmp_path, tmp_path / ".", tmp_path])
    message = str(err.value)
    assert message.count(str(tmp_path.resolve())) == 1, message
    assert "outside " + str(tmp_path.resolve()) + ";" in message, message


def _cartpole(tmp: Path, name: str, *args: str) -> dict[str, dict[str, Any]]:
    """The example cartpole rows x 8 (one-slot sims), zero agent; rows by node id."""
    out = tmp / f"{name}.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "examples/tests/cartpole.jsonl",
            "-p",
            "no:cacheprovider",
            "-q",
            "--hud-group=8",
            "--hud-agent=zero",
            "--hud-runtime=local",
            f"--hud-results={out}",
            *args,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(),
    )
    assert out.exists(), proc.stdout + proc.stderr
    return {r["nodeid"]: r for r in json.loads(out.read_text())["rollouts"]}


def test_shared_over_one_slot_sims_gives_the_results_of_no_sharing(tmp_path: Path) -> None:
    """Issue 12 #3: --hud-shared=8 over a one-slot sim errored (N-1)/N rollouts ('all 1
    slots are claimed'). Shared now reads the substrate's capacity from its env server
    and leases no more rollouts than it has slots: every row as without sharing."""
    alone = _cartpole(tmp_path, "alone")
    shared = _cartpole(tmp_path, "shared", "--hud-shared=8", "--hud-concurrency=8")
    assert len(shared) == len(alone) == 24
    errors = [r["error"] for r in shared.values() if r["error"] is not None]
    assert errors == []
    fields = ("success", "steps", "total_reward", "seed")
    assert {n: [r[f] for f in fields] for n, r in shared.items()} == {
        n: [r[f] for f in fields] for n, r in alone.items()
    }


@pytest.mark.anyio
async def test_the_env_server_reports_each_envs_capacity() -> None:
    """The fewest slots among an env's started robot endpoints; None without one."""
    from pytest_hud.runtime import LocalRuntime
    from pytest_hud.runtime.capacity import substrate_capacity
    from pytest_hud.runtime.task import Task

    for module, env, slots in (
        ("examples/envs/pendulum.py", "cartpole", 1),
        ("tests/helpers/envs/counter_env.py", "counter", 4),
    ):
        async with LocalRuntime(str(REPO / module))(Task(env, "x")) as runtime:
            assert await substrate_capacity(runtime, Task(env, "x")) == slots
