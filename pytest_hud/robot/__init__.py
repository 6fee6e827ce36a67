"""The robot capability: the openpi/0 wire, env-side bridges, the agent stack."""

from typing import TYPE_CHECKING

from pytest_hud.plumbing.lazy import exports

if TYPE_CHECKING:
    from pytest_hud.errors import (
        AdapterError,
        AgentSpecError,
        BridgeError,
        ModelOutputError,
        RobotError,
        SimError,
        WireError,
    )
    from pytest_hud.robot.agent.adapter import Adapter, LeRobotAdapter, OpenPIAdapter
    from pytest_hud.robot.agent.agent import EpisodeReport, RobotAgent, RunSettings
    from pytest_hud.robot.agent.batching import BatchedAgent, BatchedModel
    from pytest_hud.robot.agent.ensembler import Ensembler

    # (LeRobotModel ... DatasetWriter: heavy or optional, torch or lerobot; not in __all__)
    from pytest_hud.robot.agent.lerobot import LeRobotModel as LeRobotModel
    from pytest_hud.robot.agent.lerobot import lerobot_agent as lerobot_agent
    from pytest_hud.robot.agent.model import Model, RandomModel, ZeroModel
    from pytest_hud.robot.agent.policy_server import PolicyServer as PolicyServer
    from pytest_hud.robot.agent.registry import load_agent
    from pytest_hud.robot.agent.remote import RemoteModel as RemoteModel
    from pytest_hud.robot.contract import Contract, ContractError, Feature, Spaces
    from pytest_hud.robot.record.merge import merge_datasets as merge_datasets
    from pytest_hud.robot.record.writer import DatasetWriter as DatasetWriter
    from pytest_hud.robot.sim.bridge import RobotBridge
    from pytest_hud.robot.sim.endpoint import RobotEndpoint
    from pytest_hud.robot.sim.gym import GymBridge
    from pytest_hud.robot.sim.program import serve_bridge
    from pytest_hud.robot.wire.client import RobotClient
    from pytest_hud.robot.wire.codec import PROTOCOL

__getattr__, __dir__ = exports(__name__, __file__)

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
