"""The robot capability: the openpi/0 wire, env-side bridges, the agent stack."""

from pytest_hud.robot.agent.adapter import Adapter, LeRobotAdapter, OpenPIAdapter
from pytest_hud.robot.agent.agent import EpisodeReport, RobotAgent, RunSettings
from pytest_hud.robot.agent.batching import BatchedAgent, BatchedModel
from pytest_hud.robot.agent.ensembler import Ensembler
from pytest_hud.robot.agent.errors import AdapterError, AgentSpecError, ModelOutputError
from pytest_hud.robot.agent.model import Model, RandomModel, ZeroModel
from pytest_hud.robot.agent.registry import load_agent
from pytest_hud.robot.contract import Contract, ContractError, Feature, Spaces
from pytest_hud.robot.sim.bridge import RobotBridge
from pytest_hud.robot.sim.endpoint import RobotEndpoint
from pytest_hud.robot.sim.errors import BridgeError, SimError
from pytest_hud.robot.sim.gym import GymBridge
from pytest_hud.robot.sim.program import serve_bridge
from pytest_hud.robot.wire.client import RobotClient
from pytest_hud.robot.wire.codec import PROTOCOL
from pytest_hud.robot.wire.errors import RobotError, WireError

__all__ = [
    "PROTOCOL",
    "Adapter",
    "AdapterError",
    "AgentSpecError",
    "BatchedAgent",
    "BatchedModel",
    "BridgeError",
    "Contract",
    "ContractError",
    "Ensembler",
    "EpisodeReport",
    "Feature",
    "GymBridge",
    "LeRobotAdapter",
    "Model",
    "ModelOutputError",
    "OpenPIAdapter",
    "RandomModel",
    "RobotAgent",
    "RobotBridge",
    "RobotClient",
    "RobotEndpoint",
    "RobotError",
    "RunSettings",
    "SimError",
    "Spaces",
    "WireError",
    "ZeroModel",
    "load_agent",
    "serve_bridge",
]

_LAZY = {
    "LeRobotModel": "pytest_hud.robot.agent.lerobot",
    "lerobot_agent": "pytest_hud.robot.agent.lerobot",
    "RemoteModel": "pytest_hud.robot.agent.remote",
    "PolicyServer": "pytest_hud.robot.agent.policy_server",
    "DatasetWriter": "pytest_hud.robot.record.writer",
    "merge_datasets": "pytest_hud.robot.record.merge",
}


def __getattr__(name: str):
    """Heavy or optional parts (torch, lerobot) import on first use."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pytest_hud.robot' has no attribute {name!r}")
