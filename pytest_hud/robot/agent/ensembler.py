"""Ensembler: one action per tick from overlapping chunks (``temporal`` as in ACT, ``average``,
``newest``). Each episode needs its own copy (``fresh()``).
"""

from __future__ import annotations

from collections import deque

import numpy as np

__all__ = ["Ensembler"]

_MODES = ("temporal", "average", "newest")


class Ensembler:
    """``update(chunk)`` when ``wants_chunk``, then ``next()`` each tick."""

    def __init__(self, mode: str = "temporal", *, k: float = 0.01, query_every: int = 1) -> None:
        if mode not in _MODES:
            raise ValueError(f"unknown ensembling mode {mode!r}; choose one of {_MODES}")
        if query_every < 1:
            raise ValueError("query_every must be >= 1")
        self.mode = mode
        self.k = k
        self.query_every = query_every
        self._chunks: deque[tuple[int, np.ndarray]] = deque()  # (tick predicted at, chunk)
        self._tick = 0

    def fresh(self) -> Ensembler:
        """A new ensembler with the same settings and no history (one per episode)."""
        return Ensembler(self.mode, k=self.k, query_every=self.query_every)

    def reset(self) -> None:
        self._chunks.clear()
        self._tick = 0

    @property
    def wants_chunk(self) -> bool:
        """A new chunk is due at this tick (or nothing left covers it)."""
        return self._tick % self.query_every == 0 or not self._covering()

    def update(self, chunk: np.ndarray) -> None:
        """Add a ``[T, A]`` chunk predicted at the current tick."""
        chunk = np.asarray(chunk, np.float32)
        if chunk.ndim != 2:
            raise ValueError(f"an action chunk is [T, A], got shape {chunk.shape}")
        self._chunks.append((self._tick, chunk))

    def _covering(self) -> list[np.ndarray]:
        """This tick's action from every chunk that still covers it, oldest first."""
        t = self._tick
        while self._chunks and self._chunks[0][0] + len(self._chunks[0][1]) <= t:
            self._chunks.popleft()
        return [chunk[t - start] for start, chunk in self._chunks if t - start < len(chunk)]

    def next(self) -> np.ndarray:
        """The action for this tick; advances the clock."""
        preds = self._covering()
        if not preds:
            raise RuntimeError("no chunk covers this tick: call update() when wants_chunk")
        if self.mode == "newest":
            action = preds[-1]
        else:
            stack = np.stack(preds)
            if self.mode == "temporal":
                weights = np.exp(-self.k * np.arange(len(preds), dtype=np.float64))
            else:
                weights = np.ones(len(preds))
            action = (stack * (weights / weights.sum())[:, None]).sum(0).astype(np.float32)
        self._tick += 1
        return action
