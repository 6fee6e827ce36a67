"""Contract v0: validation, derivation, the contract.json round trip, spaces()."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from pytest_hud.robot.contract import Contract, ContractError, load_or_derive

MINIMAL = {
    "control_rate": 10,
    "features": {
        "observation/image": {
            "role": "observation",
            "type": "rgb",
            "names": ["height", "width", "channel"],
        },
        "observation/wrist_image": {"role": "observation", "type": "rgb"},
        "observation/state": {"role": "observation", "names": ["x", "y", "z"]},
        "action": {"role": "action", "names": ["dx", "dy", "dz", "grip"]},
    },
}


def test_spec_minimal_contract_splits_by_role() -> None:
    spaces = Contract.from_dict(MINIMAL).spaces()
    assert list(spaces.observation) == [
        "observation/image",
        "observation/wrist_image",
        "observation/state",
    ]
    assert [f.name for f in spaces.cameras] == ["observation/image", "observation/wrist_image"]
    assert spaces.state is not None and spaces.state.name == "observation/state"
    assert spaces.action_feature.name == "action"
    assert spaces.action_feature.size == 4  # from names when no shape is given


def test_descriptive_fields_and_unknown_keys_survive_a_round_trip() -> None:
    data = json.loads(json.dumps(MINIMAL))
    data["robot_type"] = "panda"
    data["features"]["observation/state"].update(
        dtype="float32",
        shape=[3],
        stats={"mean": [0, 0, 0], "std": [1, 1, 1]},
        state_type="eef",
        frame="base",
    )
    data["features"]["action"]["type"] = "ee_del"
    data["custom_top_level"] = {"anything": 1}
    assert Contract.from_dict(data).to_dict() == Contract.from_json(json.dumps(data)).to_dict()
    out = Contract.from_dict(data).to_dict()
    assert out["features"]["observation/state"]["frame"] == "base"
    assert out["custom_top_level"] == {"anything": 1}
    assert out["robot_type"] == "panda"


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d["features"]["observation/state"].pop("role"), "'observation/state'.*role"),
        (lambda d: d["features"]["action"].update(role="act"), "'action' has role 'act'"),
        (lambda d: d["features"].pop("action"), "exactly one action feature"),
        (lambda d: d["features"].update(a2={"role": "action"}), "exactly one action.*found 2"),
        (lambda d: d.update(control_rate=-5), "control_rate must be a positive"),
        (lambda d: d["features"]["observation/state"].update(shape=[]), "non-empty list"),
        (lambda d: d["features"]["observation/state"].update(names="xyz"), "names must be a list"),
        (lambda d: d.update(features={}), 'non-empty "features"'),
        (lambda d: d["features"].update(bad=[1, 2]), "'bad' must be a JSON object"),
    ],
)
def test_validation_errors_name_the_feature_and_the_fix(mutate, match) -> None:
    data = json.loads(json.dumps(MINIMAL))
    mutate(data)
    with pytest.raises(ContractError, match=match):
        Contract.from_dict(data)


def test_derive_from_image_env_observation() -> None:
    obs = {"pixels": np.zeros((96, 96, 3), np.uint8), "agent_pos": np.zeros(2, np.float32)}
    space = gym.spaces.Box(0, 512, (2,), np.float32)
    c = Contract.derive(obs, space, control_rate=10)
    f = c.features
    assert f["pixels"].type == "rgb" and f["pixels"].shape == (96, 96, 3)
    assert f["pixels"].dtype == "image"
    assert f["agent_pos"].type is None and f["agent_pos"].shape == (2,)
    assert f["action"].role == "action" and f["action"].shape == (2,)
    assert f["action"].stats == {"min": [0.0, 0.0], "max": [512.0, 512.0]}
    assert c.control_rate == 10
    assert c.spaces().state.name == "agent_pos"


def test_derive_discrete_action_and_bad_observation() -> None:
    c = Contract.derive({"s": np.zeros(4)}, gym.spaces.Discrete(2))
    assert c.features["action"].extra == {"n": 2}
    assert c.features["action"].size == 1
    with pytest.raises(ContractError, match="'depthmap'.*flatten it"):
        Contract.derive({"depthmap": np.zeros((2, 3, 4, 5))}, gym.spaces.Discrete(2))
    with pytest.raises(ContractError, match="collides"):
        Contract.derive({"action": np.zeros(2)}, gym.spaces.Discrete(2))


def test_contract_json_load_beats_derive(tmp_path: Path) -> None:
    path = tmp_path / "contract.json"
    calls = []

    def derive() -> Contract:
        calls.append(1)
        return Contract.derive({"s": np.zeros(3)}, gym.spaces.Box(-1, 1, (1,)), control_rate=30)

    first = load_or_derive(path, derive)
    assert calls == [1] and path.exists()
    edited = json.loads(path.read_text())
    edited["features"]["s"]["names"] = ["cos", "sin", "omega"]
    edited["robot_type"] = "pendulum"
    path.write_text(json.dumps(edited))
    second = load_or_derive(path, derive)
    assert calls == [1], "an existing contract.json must not be re-derived"
    assert second.features["s"].names == ("cos", "sin", "omega")
    assert second.robot_type == "pendulum" and first.robot_type is None


def test_a_broken_contract_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "contract.json"
    path.write_text('{"features": {"a": {"role": "observation"}}}')
    with pytest.raises(ContractError, match=r"contract\.json.*exactly one action"):
        Contract.load(path)
    path.write_text("{not json")
    with pytest.raises(ContractError, match="not valid JSON"):
        Contract.load(path)
