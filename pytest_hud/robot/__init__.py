"""The robot capability: the openpi/0 wire, env-side bridges and the agent-side client."""

from pytest_hud.robot.bridge import BridgeError, RobotBridge, serve_bridge
from pytest_hud.robot.client import RobotClient, RobotError
from pytest_hud.robot.contract import Contract, ContractError, Feature, Spaces
from pytest_hud.robot.endpoint import RobotEndpoint, SimError
from pytest_hud.robot.gym import GymBridge
from pytest_hud.robot.wire import PROTOCOL, WireError

__all__ = [
    "PROTOCOL",
    "BridgeError",
    "Contract",
    "ContractError",
    "Feature",
    "GymBridge",
    "RobotBridge",
    "RobotClient",
    "RobotEndpoint",
    "RobotError",
    "SimError",
    "Spaces",
    "WireError",
    "serve_bridge",
]
