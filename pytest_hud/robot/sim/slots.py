"""A vectorized sim's slots: one per copy of the sim, each with its own episode state."""

from __future__ import annotations

import enum
import secrets
from dataclasses import dataclass

import numpy as np
from websockets.asyncio.server import ServerConnection

from pytest_hud.errors import BridgeError
from pytest_hud.robot.wire.inproc import InprocServerEnd

__all__ = ["AgentConnection", "SlotState"]

#: An agent's connection as a bridge serves it: a WebSocket, or an in-process pair's end.
AgentConnection = ServerConnection | InprocServerEnd


class SlotState(enum.Enum):
    FREE = "free"  # no episode; may be claimed by a reset
    CLAIMED = "claimed"  # token issued, waiting for its agent to connect
    LIVE = "live"  # agent connected, a barrier participant
    DONE = "done"  # terminated, dropped or timed out; held until result() releases it


@dataclass(eq=False)
class _Slot:
    index: int
    state: SlotState = SlotState.FREE
    token: str | None = None
    ws: AgentConnection | None = None
    action: np.ndarray | None = None
    used: bool = False  # claimed since the last whole-sim reset
    prompt: str = ""
    reason: str = ""
    #: Reset through the control channel: its agent must present the token (no ``None``).
    token_required: bool = False

    @property
    def participant(self) -> bool:
        return self.state in (SlotState.CLAIMED, SlotState.LIVE)

    @property
    def ready(self) -> bool:
        return self.state is SlotState.LIVE and self.action is not None


def resolve_slot(slots: list[_Slot], token: object) -> _Slot:
    """The claimed slot a claim token names (None: the one slot of a one-slot sim)."""
    claimed = [s for s in slots if s.token is not None]
    if token is None:
        if len(slots) == 1 and len(claimed) == 1:
            return claimed[0]
        raise BridgeError(
            f"a claim without a token needs a one-slot sim with one episode; this sim has "
            f"{len(slots)} slots and {len(claimed)} claimed: pass the token from reset()"
        )
    if not isinstance(token, str):
        raise BridgeError(f"claim token must be a string, got {type(token).__name__}")
    for s in claimed:
        if secrets.compare_digest(s.token or "", token):
            return s
    raise BridgeError("unknown or expired slot token; call reset() and claim the new token")


def next_free(slots: list[_Slot], reusable: bool) -> _Slot:
    """The slot a new episode claims: free, and unused since the whole-sim reset unless
    slots can be reset one by one (``reusable``)."""
    for s in slots:
        if s.token is None and (reusable or not s.used):
            return s
    busy = sum(s.token is not None for s in slots)
    if busy == len(slots):
        raise BridgeError(
            f"all {len(slots)} slots are claimed: a reset past the last slot fails; "
            "grade a finished episode with result() first, or serve more num_envs"
        )
    raise BridgeError(
        f"no free slot: {busy} of {len(slots)} are claimed and the rest finished "
        "episodes of this batch; this sim resets all slots together, so a new episode "
        "starts once every slot is released (or implement reset_slot())"
    )
