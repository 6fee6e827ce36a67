"""LeRobot's own envs through ``env.lerobot(type, ...)``: the contract and every observation
are what lerobot-eval's rollout hands the policy (keys, shapes, dtypes, values, fps,
episode length), success is the env's ``is_success``, and a type that cannot be built here
is one clear error naming what is missing and how to install it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from needs import require, require_lerobot

from pytest_hud import LocalRuntime, Task, run
from pytest_hud.plumbing.loader import load_module
from pytest_hud.robot import RobotAgent
from pytest_hud.robot.agent.model import Model
from pytest_hud.robot.sim.gym import GymBridge

pytestmark = pytest.mark.lerobot_version

HERE = Path(__file__).resolve().parents[1] / "helpers"
LEROBOT_ENV = HERE / "envs" / "lerobot_env.py"
#: ALOHA's top camera at a size that renders here (its 480x640 default costs ~1 s a step).
ALOHA_CAMERA = {"observation_height": 48, "observation_width": 64}


@pytest.fixture(autouse=True)
def _lerobot() -> None:
    require_lerobot()


def need(module: str, install: str) -> None:
    import importlib.util

    require(importlib.util.find_spec(module), module, install)


def lerobot_side(env_type: str, seed: int, **config: Any) -> tuple[Any, dict[str, Any]]:
    """LeRobot's own env and its first observation after preprocess_observation."""
    from lerobot.envs.factory import make_env
    from lerobot.envs.utils import preprocess_observation

    from pytest_hud.interop.lerobot.envs import make_config

    cfg = make_config(env_type, **config)
    [vec] = [v for tasks in make_env(cfg, n_envs=1).values() for v in tasks.values()]
    same_global_draws()
    vec.reset(seed=0)  # as the sim does to derive its contract (MetaWorld's first frame differs)
    same_global_draws()
    obs, _ = vec.reset(seed=[seed])
    return vec, preprocess_observation(obs)


def same_global_draws() -> None:
    """Both sides' resets draw the same from NumPy's global random state: LeRobot's
    MetaWorld env before 0.6.1 places its objects from there, not from the seed."""
    np.random.seed(0)


def env_module(env_type: str = "pusht", num_envs: int = 1, **config: Any) -> Any:
    """tests/helpers/envs/lerobot_env.py's Environment for ``env_type``."""
    return load_module(LEROBOT_ENV, fresh=True).build(env_type, num_envs, **config)


def bridge(env_type: str, num_envs: int = 1, **config: Any) -> GymBridge:
    from pytest_hud.interop.lerobot.envs import make_lerobot_env

    return GymBridge(make_lerobot_env, make_kwargs={"env_type": env_type, **config},
                     num_envs=num_envs)  # fmt: skip


CASES = [
    ("pusht", {}, "gym_pusht", "pip install 'lerobot[pusht]'"),
    ("aloha", {"task": "AlohaTransferCube-v0", **ALOHA_CAMERA}, "gym_aloha", "gym-aloha"),
    ("aloha", {"task": "AlohaInsertion-v0", **ALOHA_CAMERA}, "gym_aloha", "gym-aloha"),
    pytest.param(
        "metaworld",
        {"task": "push-v3"},
        "metaworld",
        "pip install 'lerobot[metaworld]'",
        marks=pytest.mark.metaworld,
    ),
]
#: Env types whose LeRobot config declares an ``episode_length`` its env does not take: the
#: episode runs the env's own length (MetaWorld's 500), which lerobot-eval's rollout reads.
OWN_LENGTH = {"metaworld"}


@pytest.mark.parametrize(("env_type", "config", "module", "install"), CASES)
def test_contract_and_observations_are_what_lerobot_eval_sees(
    env_type: str, config: dict[str, Any], module: str, install: str
) -> None:
    need(module, install)
    from pytest_hud.interop.lerobot.envs import make_config

    cfg = make_config(env_type, **config)
    vec, theirs = lerobot_side(env_type, 3, **config)
    try:
        limit = int(vec.call("_max_episode_steps")[0])
    finally:
        vec.close()
    sim = bridge(env_type, **config)
    try:
        same_global_draws()
        contract = sim.ensure_contract()
        same_global_draws()
        sim.reset(seed=3)
        ours, _, _ = sim.get_observation()
        assert contract.control_rate == cfg.fps
        assert sim.env.max_episode_steps == limit
        assert limit == cfg.episode_length or env_type in OWN_LENGTH
        observed = {f.name for f in contract.features.values() if f.role == "observation"}
        assert observed == {k.replace(".", "/") for k in theirs}
        for key, value in theirs.items():
            feature, wire = contract.features[key.replace(".", "/")], ours[key.replace(".", "/")]
            their = value.numpy()
            if their.ndim == 4:  # an image: lerobot's CHW float is the wire's HWC uint8 / 255
                assert feature.dtype == "image" and wire.dtype == np.uint8
                assert tuple(feature.shape) == their.shape[2:] + their.shape[1:2]
                chw = wire.transpose(0, 3, 1, 2).astype(np.float32) / np.float32(255)
                np.testing.assert_array_equal(chw, their)
            else:
                assert feature.dtype == "float32" and tuple(feature.shape) == their.shape[1:]
                np.testing.assert_array_equal(wire, their)
        action = contract.features["action"]
        assert tuple(action.shape) == cfg.features["action"].shape
    finally:
        sim.close()


class Still(Model):
    """The action box's middle, every tick (deterministic, policy-free)."""

    def bind(self, spaces) -> None:
        stats = spaces.action_feature.stats or {}
        size = spaces.action_feature.size or 1
        low = np.asarray(stats.get("min", [0.0] * size), np.float32)
        high = np.asarray(stats.get("max", [0.0] * size), np.float32)
        self.action = (low + high) / 2

    def infer(self, batch: dict[str, Any]) -> np.ndarray:
        n = len(next(iter(batch.values())))
        return np.broadcast_to(self.action, (n, 1, len(self.action))).copy()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("env_type", "config", "module"),
    [
        ("pusht", {}, "gym_pusht"),
        pytest.param("metaworld", {"task": "push-v3"}, "metaworld", marks=pytest.mark.metaworld),
    ],
)
async def test_episode_ends_at_the_given_episode_length_and_is_graded_by_the_env(
    env_type: str, config: dict[str, Any], module: str
) -> None:
    """``episode_length`` ends the episode: through the gym env where LeRobot passes it on
    (PushT), by capping the env's own length where it does not (MetaWorld's 500)."""
    need(module, f"pip install 'lerobot[{env_type}]'")
    rows = [Task(f"lerobot-{env_type}", "episode", {"seed": s}) for s in (0, 1)]
    results = await run(
        rows,
        RobotAgent(Still()),
        LocalRuntime(lambda t: env_module(env_type, episode_length=7, **config)),
    )
    assert [r.error for r in results] == [None, None]
    assert [r.steps for r in results] == [7, 7]
    assert all(r.success is False and r.grade["truncated"] for r in results)


@pytest.mark.parametrize(
    ("env_type", "fields", "message"),
    [
        ("no-such-env", {}, r"has no env type 'no-such-env'; expected one of \[.*'pusht'"),
        ("pusht", {"colour": "red"}, r"'pusht' env config has no field \['colour'\]"),
    ],
)
def test_bad_type_or_field_is_one_clear_error(env_type: str, fields: dict, message: str) -> None:
    from pytest_hud.interop.lerobot.envs import LeRobotEnvError, make_lerobot_env

    with pytest.raises(LeRobotEnvError, match=message):
        make_lerobot_env(env_type, **fields)


UNBUILDABLE = ["libero", "robocasa", "vlabench", "libero_plus", "robotwin", "robomme"]


@pytest.mark.parametrize("env_type", UNBUILDABLE)
def test_an_env_that_cannot_be_built_here_names_the_missing_piece(env_type: str) -> None:
    from lerobot.envs.configs import EnvConfig

    from pytest_hud.interop.lerobot.envs import NEEDS, LeRobotEnvError, make_lerobot_env
    from pytest_hud.robot import lerobot_version as compat

    with pytest.raises(LeRobotEnvError) as caught:  # some import their package at reset
        make_lerobot_env(env_type).reset(seed=0)
    text = str(caught.value)
    if env_type not in EnvConfig.get_known_choices():  # older lerobot: not registered there
        assert f"lerobot {'.'.join(map(str, compat.lerobot_version()))} has no env type" in text
    else:
        need, how = NEEDS[env_type]
        assert f"LeRobot's {env_type!r} env needs {need}" in text and f"fix: {how}" in text
