"""One episode as the runtime and the agent exchange it: what an agent and its observers see
of a started run (the row it plays, the prompt and the robot capability: its url, contract and
slot token), and the report the agent gives back. ``pytest_hud.runtime.Run`` is an
:class:`EpisodeRun`; the robot layer cannot import the runtime's, so this is the typed seam.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from pytest_hud.plumbing.jsonvalue import JSONValue

__all__ = ["EpisodeReport", "EpisodeRun", "EpisodeTask"]


class EpisodeTask(Protocol):
    """The row an episode plays (``pytest_hud.Task``)."""

    @property
    def env(self) -> str: ...

    @property
    def id(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def args(self) -> Mapping[str, JSONValue]: ...

    @property
    def metadata(self) -> Mapping[str, JSONValue]: ...

    @property
    def declared_in(self) -> str | None: ...

    def to_row(self) -> Mapping[str, JSONValue]: ...


class EpisodeRun(Protocol):
    """A started run as the agent drives it (``pytest_hud.runtime.Run``)."""

    @property
    def task(self) -> EpisodeTask: ...

    @property
    def prompt(self) -> str: ...

    @property
    def robot(self) -> dict[str, object]: ...

    @property
    def robot_token(self) -> str | None: ...


@dataclass
class EpisodeReport:
    """What the agent saw: steps, why it stopped, and where the time went."""

    steps: int = 0
    terminated: bool = False
    truncated_by_agent: bool = False
    inferences: int = 0
    infer_s: float = 0.0
    env_s: float = 0.0
    wall_s: float = 0.0
    total_reward: float | None = None
    extra: dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        out = {k: v for k, v in self.__dict__.items() if k != "extra"}
        out.update(self.extra)
        return out
