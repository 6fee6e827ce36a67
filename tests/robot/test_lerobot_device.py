"""LeRobot checkpoints load on the device the session placed the process on (issue 54):
``$PYTEST_HUD_DEVICE`` (``--hud-devices``) replaces the checkpoint's own device, and the
preprocessor's device step moves with the policy.

The first test loads a real checkpoint on this machine's one device (its CPU) although the
checkpoint says ``cuda``. The second needs a GPU this machine lacks: LeRobot's policy class
and processor factory are replaced by recorders (a policy with no parameters cannot be moved
to a missing GPU), so what is checked is what LeRobot is asked for.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_hud.robot.agent.device import DEVICE_ENV

pytestmark = pytest.mark.lerobot


def device_steps(pipeline: Any) -> list[str]:
    return [str(s.device) for s in pipeline.steps if type(s).__name__ == "DeviceProcessorStep"]


def test_a_checkpoint_saved_for_cuda_loads_on_the_placed_cpu(
    tiny_act_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_hud.robot.agent.lerobot import LeRobotModel, load_policy

    ckpt = Path(shutil.copytree(tiny_act_path, tmp_path / "ckpt"))
    config = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**config, "device": "cuda"}))
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    policy, pre, _ = load_policy(ckpt)
    assert policy.config.device == "cpu"
    assert str(next(iter(policy.parameters())).device) == "cpu"
    assert device_steps(pre) == ["cpu"]
    assert str(LeRobotModel(policy, pre, _).device) == "cpu"


def test_the_placed_gpu_is_what_lerobot_is_asked_for(
    tiny_act_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lerobot.policies.factory as factory

    from pytest_hud.robot.agent.lerobot import load_policy

    asked: dict[str, Any] = {}

    class Policy:  # LeRobot's class, as far as the loader sees it; no weights to move
        def __init__(self, config: Any) -> None:
            self.config = config

        @classmethod
        def from_pretrained(cls, source: str, config: Any) -> Policy:
            asked["device"] = config.device
            return cls(config)

        def eval(self) -> None:
            pass

        def parameters(self) -> Any:
            return iter(())

    def processors(config: Any, **kwargs: Any) -> tuple[str, str]:
        asked["processors"] = kwargs["preprocessor_overrides"]
        return "pre", "post"

    monkeypatch.setattr(factory, "get_policy_class", lambda kind: Policy)
    monkeypatch.setattr(factory, "make_pre_post_processors", processors)
    monkeypatch.setenv(DEVICE_ENV, "cuda:1")
    load_policy(tiny_act_path)
    assert asked == {"device": "cuda:1", "processors": {"device_processor": {"device": "cuda:1"}}}
    load_policy(tiny_act_path, device="cuda:0")  # a device passed in wins
    assert asked["device"] == "cuda:0"
