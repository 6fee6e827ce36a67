"""Errors a user can act on: a template's own exception and lines, one session-level
error for an agent that cannot load, and usage errors without fixture tracebacks.
Real pytest sessions (pytester, subprocesses) over a real env server."""

from __future__ import annotations

import pytest

from pytest_hud.runtime.ports import free_port

ENV = """
from pytest_hud import Environment
from pytest_hud.robot import RobotEndpoint
from tests_sims import LineSim

env = Environment("faulty")
sim = RobotEndpoint(LineSim)
env.add_capability(sim)


def compute_grade(total):
    return {"score": total / 0.0}


@env.template()
async def late(seed: int = 0):
    ep = await sim.reset(seed=seed)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    await sim.result(token=ep["token"])
    yield compute_grade(1.0)


@env.template()
async def early(seed: int = 0):
    raise KeyError("no such object: red_mug")
    yield {"prompt": "never"}
"""

SIM = '''
import numpy as np
from pytest_hud.robot import RobotBridge


class LineSim(RobotBridge):
    """One slot that ends after two ticks."""

    contract = {"control_rate": 20, "features": {
        "observation/state": {"role": "observation", "shape": [1]},
        "action": {"role": "action", "shape": [1], "stats": {"min": [-1], "max": [1]}}}}

    def reset(self, seed=0):
        self.t = 0
        return "walk"

    def step(self, actions):
        self.t += 1

    def get_observation(self):
        return {"observation/state": np.zeros((1, 1), np.float32)}, np.array([self.t >= 2])

    def result_slots(self):
        return [{"score": 1.0, "success": True, "total_reward": 1.0, "steps": self.t}]
'''


@pytest.fixture
def faulty(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(faulty_env=ENV, tests_sims=SIM)
    pytester.makeconftest("import faulty_env  # noqa: F401\n")
    pytester.makeini("[pytest]\nhud_agent = zero\n")
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=240)


def test_a_raising_template_shows_its_own_exception_and_lines(faulty) -> None:
    faulty.makepyfile(
        test_faulty="""
import pytest
from faulty_env import late, early

@pytest.mark.hud(tasks=[late.task(), early.task()])
def test_grade(hud_result):
    assert hud_result.success
"""
    )
    result = run(faulty)
    result.assert_outcomes(errors=2)
    out = result.stdout.str()
    # the grade half: the template's type, message, and the env module's lines
    assert "the template raised ZeroDivisionError: float division by zero (during result())" in out
    assert "faulty_env.py" in out and 'return {"score": total / 0.0}' in out
    assert "in compute_grade" in out
    # the start half
    assert "the template raised KeyError: 'no such object: red_mug' (during start())" in out
    assert 'raise KeyError("no such object: red_mug")' in out
    # and not the control channel's machinery
    assert "env server result() failed" not in out
    assert "control.py" not in out


ROWS = """
import pytest
from faulty_env import late

@pytest.mark.hud(tasks=[late.task(seed=s) for s in range(4)])
def test_rows(hud_result):
    pass
"""


def test_an_agent_factory_that_raises_is_one_usage_error_before_any_item(faulty) -> None:
    faulty.makepyfile(
        test_rows=ROWS,
        my_agents="def broken():\n    raise FileNotFoundError('weights.pt is missing')\n",
    )
    result = run(faulty, "--hud-agent=my_agents:broken")
    assert result.ret == 4, result.stdout.str() + result.stderr.str()
    err = result.stderr.str()
    assert err.count("building the agent raised FileNotFoundError: weights.pt is missing") == 1
    assert "ERROR at setup" not in result.stdout.str()


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_an_agent_factory_that_is_not_there_is_one_usage_error(faulty, xdist) -> None:
    faulty.makepyfile(test_rows=ROWS, my_agents="def other():\n    pass\n")
    result = run(faulty, "--hud-agent=my_agents:missing", *xdist)
    assert result.ret == 4, result.stdout.str() + result.stderr.str()
    assert "cannot load agent 'my_agents:missing'" in result.stderr.str()
    assert "ERROR at setup" not in result.stdout.str()


@pytest.mark.parametrize(
    ("offline", "xdist"),
    [(True, []), (False, []), (False, ["-n", "2"])],
    ids=["HF_HUB_OFFLINE", "refused", "refused-xdist"],
)
def test_an_unreachable_hub_checkpoint_is_one_quick_usage_error(
    faulty, monkeypatch, tmp_path, offline, xdist
) -> None:
    """The hub is a refused loopback port (or HF_HUB_OFFLINE): no dial beyond 127.0.0.1."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    if offline:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    faulty.makepyfile(test_rows=ROWS)
    result = run(faulty, "--hud-agent=lerobot:nobody/no_such_policy", *xdist)
    assert result.ret == 4, result.stdout.str() + result.stderr.str()
    err = result.stderr.str()
    assert "cannot fetch the checkpoint 'nobody/no_such_policy'" in err or (
        "not in the local hub cache and HF_HUB_OFFLINE is set" in err
    )
    expected = "HF_HUB_OFFLINE is set" if offline else "ConnectionRefusedError"
    assert expected in err
    assert "ERROR at setup" not in result.stdout.str()


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
@pytest.mark.parametrize("runtime", ["docker", "docker:some-image"])
def test_a_docker_engine_that_does_not_answer_is_one_usage_error(
    faulty, monkeypatch, tmp_path, runtime, xdist
) -> None:
    """DOCKER_HOST names a socket nobody serves: one line before any item, not the same
    SubstrateError on every item (it was 32 ERRORs for 32 rows)."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-engine.sock'}")
    faulty.makepyfile(test_rows=ROWS)
    result = run(faulty, f"--hud-runtime={runtime}", *xdist)
    assert result.ret == 4, result.stdout.str() + result.stderr.str()
    err = result.stderr.str()
    assert err.count(f"--hud-runtime={runtime}: cannot reach a Docker engine") == 1, err
    assert "or point DOCKER_HOST at one" in err and ".ci/" not in err
    assert "ERROR at setup" not in result.stdout.str()


def test_usage_errors_come_without_fixture_source(faulty) -> None:
    faulty.makepyfile(
        test_usage="""
def test_unmarked(hud_result):
    pass
"""
    )
    result = run(faulty, "test_usage.py")
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert "uses hud fixtures but has no task rows: mark it with" in out
    assert "def hud_task(" not in out and "raise pytest.UsageError(" not in out


def test_an_undeclared_env_row_without_env_modules_is_one_short_error(
    pytester: pytest.Pytester,
) -> None:
    """Nothing declares any env here: the row errors at setup, in one line."""
    pytester.path.joinpath("rows.jsonl").write_text('{"env": "ghost", "id": "t"}\n')
    result = run(pytester, "rows.jsonl", "--hud-agent=zero")
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert "no module declares env 'ghost'" in out
    assert "def hud_result(" not in out and "raise RolloutError(result)" not in out


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ('{"env": "faulti", "id": "late"}', "no env 'faulti' in the imported env modules "),
        ('{"env": "faulty", "id": "lat"}', "env 'faulty' has no template 'lat' (its templates"),
        (
            '{"env": "faulti", "id": "late", "module": "faulty_env.py"}',
            "no env 'faulti' in faulty_env.py (it declares: faulty)",
        ),
    ],
    ids=["env", "template", "module-column"],
)
def test_an_unknown_env_or_template_in_a_row_is_found_at_collection(faulty, row, message) -> None:
    faulty.path.joinpath("rows.jsonl").write_text(row + "\n")
    result = run(faulty, "rows.jsonl")
    out = result.stdout.str()
    assert result.ret == 2, out + result.stderr.str()  # a collection error: nothing ran
    assert "1 error during collection" in out and message in out
    assert "_manager.py" not in out and "collect.py" not in out  # just the message


def test_rows_for_an_overriding_provider_are_not_checked_against_local_envs(faulty) -> None:
    """A conftest's hud_provider may serve envs this process never imports."""
    faulty.makepyfile(
        test_elsewhere="""
import pytest
from pytest_hud import Task

@pytest.fixture
def hud_provider():
    pytest.skip("served elsewhere")

@pytest.mark.hud(tasks=[Task(env="remote_only", id="t")])
def test_remote(hud_result):
    pass
"""
    )
    result = run(faulty, "test_elsewhere.py")
    result.assert_outcomes(skipped=1)
