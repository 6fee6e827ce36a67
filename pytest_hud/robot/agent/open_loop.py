"""An agent's actions on recorded observations, through its own wiring, without an env: set
against a dataset's actions, it tells a policy that acts differently.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from pytest_hud.robot.agent.adapter import Adapter
from pytest_hud.robot.agent.agent import RobotAgent, _row
from pytest_hud.robot.agent.model import check_chunk
from pytest_hud.robot.contract import Spaces

__all__ = ["open_loop"]


async def open_loop(
    agent: RobotAgent,
    spaces: Spaces,
    observations: Sequence[dict[str, Any]],
    prompt: str,
) -> np.ndarray:
    """``[T, A]``: the action ``agent`` sends at each of the ``T`` observations."""
    adapter = (agent.adapter or Adapter()).bind(spaces)
    model = agent.model
    model.bind(spaces)
    size = spaces.action_feature.size
    base = agent.ensembler or getattr(model, "ensembler", None)
    ensembler = base.fresh() if base is not None else None
    keep = agent.chunk_size or getattr(model, "n_action_steps", None)
    history = max(1, int(getattr(model, "n_obs_steps", 1) or 1))
    recent: deque[dict[str, object]] = deque(maxlen=history)
    queue: deque[np.ndarray] = deque()
    actions: list[np.ndarray] = []
    for data in observations:
        recent.append(data)
        if ensembler.wants_chunk if ensembler is not None else not queue:
            raw = await model.ainfer(_row(adapter, recent, history, prompt))
            chunk = adapter.action(check_chunk(raw, 1, size, type(model).__name__)[0])
            if ensembler is not None:
                ensembler.update(chunk)
            else:
                queue.extend(chunk[:keep] if keep else chunk)
        action = ensembler.next() if ensembler is not None else queue.popleft()
        actions.append(np.asarray(action, np.float32).reshape(-1))
    return np.stack(actions) if actions else np.zeros((0, size or 0), np.float32)
