"""The Ray runtime: each lease's env server in a Ray actor (:mod:`.runtime`, the actor's
side in :mod:`.env_server`), placed by the row's resources (:mod:`.resources`); whole
rollouts shipped as Ray tasks (:mod:`.delegate`); a local head on loopback for a session
(:mod:`.head`). Joining the cluster is :mod:`pytest_hud.cluster` (the agent side's
policy replicas join it too)."""

from typing import TYPE_CHECKING

from pytest_hud._lazy import exports

if TYPE_CHECKING:
    from pytest_hud.runtime.ray.delegate import delegated_rollout
    from pytest_hud.runtime.ray.head import RayHead
    from pytest_hud.runtime.ray.resources import placement_options
    from pytest_hud.runtime.ray.runtime import RayRuntime, address_from_spec, live_actors

__getattr__, __dir__ = exports(__name__, __file__)

__all__ = [
    "RayHead",
    "RayRuntime",
    "address_from_spec",
    "delegated_rollout",
    "live_actors",
    "placement_options",
]
