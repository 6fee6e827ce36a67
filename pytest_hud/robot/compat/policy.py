"""What a policy expects, as plain data (:class:`PolicySpec`), built by the agent side or sent in
a policy server's metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Need", "PolicySpec"]


@dataclass(frozen=True)
class Need:
    """One input or output a policy declares. ``kind``: camera, state, env_state, action.
    Camera shapes are HWC, as the contract writes them; ``stats`` are per element."""

    key: str
    kind: str
    shape: tuple[int, ...] | None = None
    stats: dict[str, list[float]] | None = None
    norm: str | None = None

    @property
    def size(self) -> int | None:
        return int(np.prod(self.shape)) if self.shape else None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"key": self.key, "kind": self.kind}
        if self.shape is not None:
            out["shape"] = list(self.shape)
        if self.stats is not None:
            out["stats"] = self.stats
        if self.norm is not None:
            out["norm"] = self.norm
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Need:
        shape = data.get("shape")
        stats = data.get("stats")
        return cls(
            str(data["key"]),
            str(data["kind"]),
            tuple(int(d) for d in shape) if shape is not None else None,
            {str(k): [float(x) for x in v] for k, v in stats.items()} if stats else None,
            data.get("norm"),
        )


@dataclass(frozen=True)
class PolicySpec:
    """What a policy expects: its inputs and action (``needs``), the actions it executes
    per inference (``chunk``), the adapter's ``camera_map``; ``source`` names it."""

    source: str
    needs: tuple[Need, ...] = ()
    chunk: int | None = None
    camera_map: dict[str, str] = field(default_factory=dict)

    def of_kind(self, kind: str) -> list[Need]:
        return [n for n in self.needs if n.kind == kind]

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"needs": [n.to_dict() for n in self.needs]}
        if self.chunk is not None:
            out["chunk"] = self.chunk
        if self.camera_map:
            out["camera_map"] = dict(self.camera_map)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str) -> PolicySpec:
        needs = tuple(Need.from_dict(n) for n in data.get("needs") or ())
        chunk = data.get("chunk")
        return cls(source, needs, int(chunk) if chunk else None, dict(data.get("camera_map") or {}))
