"""The compatibility preflight (issue 28 part 1) with a real checkpoint: the tiny random ACT
of ``lerobot_fixtures.make_tiny_act`` (one 96x96 camera, 2-dim state and action, PushT's
stats, 8 actions per inference) against the envs of tests/helpers/envs/compat_env.py, each
built to meet it one way. The probe episodes run through the real path (LocalRuntime, the
control channel, the openpi/0 wire); sessions are real pytest runs (subprocesses).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from paths import ENVS

from pytest_hud.robot.compat import MISMATCH, OK, RESIZE, WARN, Table

COMPAT_ENV = ENVS / "compat_env.py"
WAIT = 120.0

TESTS = """
import pytest
from compat_env import ENVS

ROWS = [t for name in {envs!r} for t in ENVS[name].tasks]


@pytest.mark.hud(tasks=ROWS)
def test_episode(hud_result):
    assert hud_result.success, hud_result.summary()
"""


@pytest.fixture(scope="module")
def act_agent(tiny_act_path: Path) -> Any:
    from pytest_hud.robot.agent.registry import load_agent

    return load_agent(f"lerobot:{tiny_act_path}")


def check_env(agent: Any, name: str) -> Table:
    from pytest_hud.features.preflight.checks import check_agent, first_rows
    from pytest_hud.plumbing.loader import load_module
    from pytest_hud.runtime.placement import provider_for

    envs = load_module(COMPAT_ENV).ENVS
    (table,) = check_agent(agent, "ACT", first_rows(envs[name].tasks), provider_for("local"))
    return table


def rows(table: Table) -> dict[str, Any]:
    return {r.feature: r for r in table.rows}


# -- in-process: each soft finding from an env built to show it -------------------------------
def test_an_honest_env_fits_with_no_warning(act_agent: Any) -> None:
    table = check_env(act_agent, "compat-honest")
    assert {r.verdict for r in table.rows} == {OK}, table.render()
    found = rows(table)
    # every kind of check ran: inputs, stats, and the first steps of a real episode
    for feature in ("observation.image", "observation.state", "action", "normalization stats"):
        assert feature in found, table.render()
    assert "observation.state values" in found and "actions emitted" in found
    assert found["action chunk"].expects == "8 actions per inference"


@pytest.mark.parametrize(
    ("env", "feature", "verdict", "said"),
    [
        ("compat-far", "observation.state values", WARN, "dim 0 is 1e+05 at step 0"),
        ("compat-range", "actions emitted", WARN, "range -1..1"),
        ("compat-short", "action chunk", WARN, "the policy plans 8 steps open loop"),
        ("compat-resize", "observation.image", RESIZE, "renders 64x48"),
    ],
)
def test_each_soft_finding_with_its_fix(
    act_agent: Any, env: str, feature: str, verdict: str, said: str
) -> None:
    table = check_env(act_agent, env)
    assert not table.hard, table.render()
    assert [r.feature for r in table.soft] == [feature], table.render()
    row = rows(table)[feature]
    assert row.verdict == verdict and said in row.fix, table.render()


# -- pytest sessions ------------------------------------------------------------------------
@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """compat_env importable (and imported by the conftest, as the controller sees it)."""
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ENVS), path) if p))
    pytester.makeconftest("import compat_env  # noqa: F401\n")
    return pytester


def session(suite: pytest.Pytester, ckpt: Path, envs: list[str], *args: str) -> Any:
    suite.makepyfile(test_compat=TESTS.format(envs=envs))
    out = suite.path / "results.json"
    result = suite.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--hud-agent=lerobot:{ckpt}", f"--hud-results={out}",
        *args, timeout=300,
    )  # fmt: skip
    done = json.loads(out.read_text())["rollouts"] if out.exists() else []
    return result, done


@pytest.mark.parametrize("workers", [None, "2"], ids=["n0", "n2"])
def test_a_missing_camera_and_another_action_size_fail_before_any_item(
    suite: pytest.Pytester, tiny_act_path: Path, workers: str | None
) -> None:
    extra = ("-n", workers) if workers else ()
    result, done = session(suite, tiny_act_path, ["compat-nocam", "compat-action3"], *extra)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    err = result.stderr.str()
    assert f"--hud-agent=lerobot:{tiny_act_path} cannot run on the env" in err, err
    assert "env 'compat-nocam'" in err and "env 'compat-action3'" in err
    assert "camera 96x96x3" in err and "no camera" in err and MISMATCH in err
    assert "add a camera to env 'compat-nocam'" in err
    assert "action 2" in err and "action 3 in" in err  # both sides of the action
    assert "--hud-preflight=off" in err
    assert not done  # no rollout ran
    assert "env 'compat-honest'" not in err  # the conftest imports it; no item uses it


def test_an_honest_env_runs_with_no_warning_once_per_agent_under_xdist(
    suite: pytest.Pytester, tiny_act_path: Path, tmp_path: Path
) -> None:
    """Two agents (an A/B session): each is checked once, on the controller."""
    other = shutil.copytree(tiny_act_path, tmp_path / "other")
    arms = f"--hud-agent=lerobot:{other}", "--hud-ab-seed=0"
    result, done = session(suite, tiny_act_path, ["compat-honest"], *arms, "-n", "2", "-v")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, out
    assert out.count("fits (") == 2, out
    for ckpt in (tiny_act_path, other):
        assert out.count(f"lerobot:{ckpt} on env 'compat-honest': fits") == 1, out
    assert "CompatWarning" not in out and "warnings summary" not in out
    assert len(done) == 2 and all(r["success"] for r in done)


def test_a_soft_finding_is_one_table_before_the_items_and_one_warning(
    suite: pytest.Pytester, tiny_act_path: Path
) -> None:
    result, done = session(suite, tiny_act_path, ["compat-resize"])
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, out
    assert out.count("pytest-hud preflight: lerobot:") == 1, out
    table_at = out.index("observation/image 48x64x3 rgb")
    assert table_at < out.index("test_compat.py")  # printed before the items ran
    assert "CompatWarning" in out and "observation.image: resize" in out  # the summary's
    assert len(done) == 1


def test_strict_or_w_error_fail_on_a_soft_finding_and_off_skips_the_check(
    suite: pytest.Pytester, tiny_act_path: Path
) -> None:
    result, done = session(suite, tiny_act_path, ["compat-resize"], "--hud-preflight=strict")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert "--hud-preflight=strict" in result.stderr.str() and RESIZE in result.stderr.str()
    assert not done
    warning = "-W", "error::pytest_hud.robot.compat.CompatWarning"  # the warning as an error
    result, done = session(suite, tiny_act_path, ["compat-resize"], *warning)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert "observation.image: resize" in result.stderr.str() and not done
    result, done = session(suite, tiny_act_path, ["compat-nocam"], "--hud-preflight=off")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert "pytest-hud preflight" not in result.stdout.str() + result.stderr.str()
    assert [r["error_type"] for r in done] == ["AdapterError"]  # the item errors instead


# -- python -m pytest_hud check ----------------------------------------------------------------
def rows_file(folder: Path, *envs: str) -> Path:
    path = folder / "rows.jsonl"
    lines = [
        {"env": e, "id": "episode", "args": {"seed": 0}, "metadata": {"module": str(COMPAT_ENV)}}
        for e in envs
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def check(agent: str, rows: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pytest_hud", "check", "--agent", agent, str(rows), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def test_the_check_command_prints_the_table_and_exits_1_on_a_mismatch(
    tiny_act_path: Path, tmp_path: Path
) -> None:
    done = check(f"lerobot:{tiny_act_path}", rows_file(tmp_path, "compat-range", "compat-nocam"))
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "env 'compat-range'" in out and "env 'compat-nocam'" in out
    assert "feature" in out and "policy expects" in out and "env provides" in out
    assert " ok" in out and " warn" in out and MISMATCH in out
    assert "check: 2 env(s), 1 mismatch(es), 1 warning(s)" in out
    fits = check(f"lerobot:{tiny_act_path}", rows_file(tmp_path, "compat-honest"))
    assert fits.returncode == 0 and "0 mismatch(es), 0 warning(s)" in fits.stdout, fits.stdout


@pytest.fixture
def policy_server(tiny_act_path: Path) -> Iterator[str]:
    """``python -m pytest_hud policy-server`` serving the tiny ACT: its host:port."""
    from pytest_hud.robot.agent.policy_server import ANNOUNCE

    argv = [sys.executable, "-m", "pytest_hud", "policy-server"]
    argv += ["--agent", f"lerobot:{tiny_act_path}", "--port", "0"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + WAIT
        url = None
        while url is None:
            left = deadline - time.monotonic()
            assert left > 0, "the policy server did not announce itself"
            ready, _, _ = select.select([proc.stdout], [], [], left)
            line = proc.stdout.readline() if ready else ""
            assert line or proc.poll() is None, f"the policy server exited ({proc.poll()})"
            if line.startswith(ANNOUNCE):
                url = json.loads(line[len(ANNOUNCE) :])["url"]
        yield url.removeprefix("ws://")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=WAIT)


def test_an_openpi_server_is_checked_by_what_its_metadata_declares(
    policy_server: str, tmp_path: Path
) -> None:
    done = check(f"openpi:{policy_server}", rows_file(tmp_path, "compat-nocam"))
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert f"openpi:{policy_server} on env 'compat-nocam'" in out
    assert "camera 96x96x3" in out and "no camera" in out  # from the server's metadata
    assert "action 2" in out and "normalization stats" in out
