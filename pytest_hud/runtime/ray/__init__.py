"""The Ray runtime: env servers in actors (:mod:`.runtime`), delegated rollouts (:mod:`.delegate`)
and a local head (:mod:`.head`); joining is :mod:`pytest_hud.plumbing.cluster`.
"""

from typing import TYPE_CHECKING

from pytest_hud.plumbing.lazy import exports

if TYPE_CHECKING:
    from pytest_hud.runtime.ray.delegate import delegated_rollout
    from pytest_hud.runtime.ray.head import RayHead
    from pytest_hud.runtime.ray.resources import placement_options
    from pytest_hud.runtime.ray.runtime import RayRuntime, live_actors

__getattr__, __dir__ = exports(__name__, __file__)

__all__ = [
    "RayHead",
    "RayRuntime",
    "delegated_rollout",
    "live_actors",
    "placement_options",
]
