"""What a sim implements for :class:`~pytest_hud.robot.sim.bridge.RobotBridge`: its hooks and the
contract it publishes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TypeAlias

import numpy as np
from numpy.typing import ArrayLike

from pytest_hud.errors import BridgeError
from pytest_hud.robot.contract import Contract

__all__ = ["Batched", "SimHooks"]

#: A sim's observation of all its slots: ``(data{name: [N, ...]}, terminated[N])``, with the
#: step's ``reward[N]`` (or None) third where the sim has one.
Batched: TypeAlias = (
    tuple[Mapping[str, ArrayLike], ArrayLike]
    | tuple[Mapping[str, ArrayLike], ArrayLike, ArrayLike | None]
)


class SimHooks(ABC):
    """The sim side of a bridge (see RobotBridge for the protocol around it)."""

    num_envs: int = 1
    contract: Contract | Mapping[str, object] | None = None

    @property
    def action_size(self) -> int | None:
        """The contract's action size once serving (the bridge knows it)."""
        return None

    # -- hooks users implement ----------------------------------------------
    @abstractmethod
    def reset(self, **task_args: object) -> str:
        """Start a new episode on every slot; return the task prompt."""

    @abstractmethod
    def step(self, actions: np.ndarray) -> None:
        """Advance the sim one control tick with a ``[num_envs, A]`` action batch."""

    @abstractmethod
    def get_observation(self) -> Batched | None:
        """``(data{name: [N, ...]}, terminated[N])``, optionally ``reward[N]`` third."""

    def reset_slot(self, index: int, **task_args: object) -> str:
        """Reset one slot of a vectorized sim alone (optional)."""
        raise NotImplementedError

    def can_reset_slot(self) -> bool:
        """Whether :meth:`reset_slot` works here (default: the subclass overrides it)."""
        return type(self).reset_slot is not SimHooks.reset_slot

    def step_slots(self, indices: list[int], actions: np.ndarray) -> None:
        """Advance only the slots ``indices`` one tick with ``[len(indices), A]`` actions
        (optional: copies that are independent sims, such as a SyncVectorEnv's). With it,
        a slot steps as soon as its agent acts instead of at a barrier with its peers, so
        one group of rollouts steps while another waits on the policy."""
        raise NotImplementedError

    def can_step_slots(self) -> bool:
        """Whether :meth:`step_slots` works here (default: the subclass overrides it)."""
        return type(self).step_slots is not SimHooks.step_slots

    def result_slots(self) -> list[dict[str, object]]:
        """One grade dict per slot; default broadcasts :meth:`result`."""
        grade = self.result()
        return [dict(grade) for _ in range(self.num_envs)]

    def result(self) -> dict[str, object]:
        """The episode's grade: ``score``, ``success``, ``total_reward``."""
        success = bool(getattr(self, "success", False))
        return {
            "score": 1.0 if success else 0.0,
            "success": success,
            "total_reward": float(getattr(self, "total_reward", 0.0)),
        }

    def camera_frames(self) -> Mapping[str, ArrayLike] | None:
        """The cameras now, between episodes (an operator's reset gate shows them live):
        ``{name: HxWx3 uint8}``, ``{}`` for a robot without a camera, or None (the
        default) where this sim cannot be read while no episode runs. Called with no slot
        claimed, on the sim thread; a real robot connects here if it has not yet."""
        return None

    def hold_action(self) -> np.ndarray:
        """The action an idle slot gets at a barrier step (zeros)."""
        return np.zeros(self.action_size or 1, np.float32)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the sim (called once, on the sim thread, when serving stops)."""

    def ensure_contract(self) -> Contract:
        """The contract to publish; subclasses may derive it lazily (on the sim thread)."""
        if self.contract is None:
            raise BridgeError(
                f"{type(self).__name__} has no contract: set self.contract to a Contract or "
                "a contract v0 dict before serving"
            )
        return Contract.from_dict(self.contract)
