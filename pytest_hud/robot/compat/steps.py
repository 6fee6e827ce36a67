"""What the first steps of a real episode show: states far outside the checkpoint's
stats, actions outside the env's range, a chunk longer than the episode."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from pytest_hud.robot.compat.inputs import span_text, value_range
from pytest_hud.robot.compat.policy import PolicySpec
from pytest_hud.robot.compat.table import OK, WARN, Row
from pytest_hud.robot.contract import Spaces

__all__ = ["STATE_SDS", "action_rows", "chunk_row", "state_rows"]

#: A state this many standard deviations from the checkpoint's mean is "far outside".
STATE_SDS = 10.0


def _state_matrix(spaces: Spaces, kind: str, frames: Iterable[Mapping[str, object]]) -> np.ndarray:
    feats = spaces.robot_states if kind == "state" else spaces.env_states
    rows = [
        np.concatenate([np.asarray(f[x.name], np.float64).reshape(-1) for x in feats])
        for f in frames
        if all(x.name in f for x in feats)
    ]
    return np.stack(rows) if rows else np.zeros((0, 0))


def state_rows(
    spec: PolicySpec, spaces: Spaces, frames: Sequence[Mapping[str, object]]
) -> list[Row]:
    """States of the first ``frames`` against the checkpoint's stats (mean/std, else
    min/max): a value :data:`STATE_SDS` spreads away is a warning."""
    rows = []
    for need in [*spec.of_kind("state"), *spec.of_kind("env_state")]:
        stats = need.stats or {}
        if "mean" in stats and "std" in stats:
            center, spread = np.asarray(stats["mean"]), np.asarray(stats["std"])
        elif "min" in stats and "max" in stats:
            low, high = np.asarray(stats["min"]), np.asarray(stats["max"])
            center, spread = (low + high) / 2, (high - low) / np.sqrt(12.0)
        else:
            continue
        values = _state_matrix(spaces, need.kind, frames)
        if values.size == 0 or values.shape[1] != center.size:
            continue
        z = np.abs(values - center) / np.maximum(spread, 1e-8)
        step, dim = np.unravel_index(int(np.argmax(z)), z.shape)
        worst = float(z[step, dim])
        want = f"within {STATE_SDS:g} sd of its stats"
        seen = f"{len(values)} steps: max {worst:.3g} sd"
        if worst <= STATE_SDS:
            rows.append(Row(f"{need.key} values", want, seen, OK))
            continue
        fix = (
            f"dim {dim} is {values[step, dim]:.4g} at step {step}, the checkpoint's data has "
            f"mean {center[dim]:.4g} sd {spread[dim]:.4g}: the env's state is in other units, "
            "order or frame than the training data; convert it in the env, or use a "
            "checkpoint trained on this env"
        )
        rows.append(Row(f"{need.key} values", want, seen, WARN, fix))
    return rows


def _trained_center(stats: Mapping[str, list[float]] | None, size: int) -> np.ndarray | None:
    """The middle of the checkpoint's training actions per dim (median, mean, or min/max)."""
    stats = stats or {}
    for key in ("q50", "mean"):
        if len(stats.get(key) or ()) == size:
            return np.asarray(stats[key], np.float64)
    if len(stats.get("min") or ()) == size and len(stats.get("max") or ()) == size:
        return (np.asarray(stats["min"]) + np.asarray(stats["max"])) / 2
    return None


def action_rows(
    spaces: Spaces,
    actions: Sequence[np.ndarray],
    source: str = "policy",
    trained: Mapping[str, list[float]] | None = None,
) -> list[Row]:
    """The actions the policy emitted on the first steps against the env's declared range.

    Outside it is a warning, unless ``trained`` (the checkpoint's action stats) shows
    its training actions in the env's units (their middle within one range width of the
    range): demonstrations whose actions the env clipped teach a policy to overshoot as
    they did, which is not a wiring fault (the row is ok and says so)."""
    act = spaces.action_feature
    span = value_range(act)
    if span is None or not len(actions):
        return []
    low, high = span
    values = np.stack([np.asarray(a, np.float64).reshape(-1) for a in actions])
    if values.shape[1] != low.size:
        return []
    width = np.maximum(high - low, 1e-6)
    tol = 1e-3 * width
    over = np.maximum(values - (high + tol), 0) + np.maximum((low - tol) - values, 0)
    emitted = f"{len(values)} steps in {span_text(values.min(0), values.max(0))}"
    env_range = f"{act.name} in {span_text(low, high)}"
    if not np.any(over > 0):
        return [Row("actions emitted", emitted, env_range, OK)]
    dims = sorted({int(d) for d in np.nonzero(over > 0)[1]})
    center = _trained_center(trained, low.size)
    if center is not None and all(
        low[d] - width[d] <= center[d] <= high[d] + width[d] for d in dims
    ):
        return [Row("actions emitted", emitted, f"{env_range} (clipped, as in training)", OK)]
    d = dims[0]
    fix = (
        f"{source}'s actions leave the env's range on dims {dims} (e.g. dim {d}: "
        f"{values[:, d].min():.4g}..{values[:, d].max():.4g}, range {low[d]:.4g}..{high[d]:.4g}"
        + (f", its training actions centred at {center[d]:.4g}" if center is not None else "")
        + "): other units or scale (unnormalized actions, absolute vs delta, degrees vs "
        "radians); the env clips or rejects them"
    )
    return [Row("actions emitted", emitted, env_range, WARN, fix)]


def chunk_row(chunk: int | None, episode: int | None, why: str) -> list[Row]:
    """A chunk the policy executes open loop, against the episode's length (``why``
    says where that came from; with ``episode`` None, how long it ran without ending)."""
    if chunk is None:
        return []
    want = f"{chunk} actions per inference"
    if episode is None:
        return [Row("action chunk", want, f"episode > {why}", OK)]
    have = f"episode of {episode} steps ({why})"
    if chunk <= episode:
        return [Row("action chunk", want, have, OK)]
    fix = (
        f"the policy plans {chunk} steps open loop, the episode has {episode}: it never "
        "sees a second observation; pass a smaller chunk_size (n_action_steps) to the agent"
    )
    return [Row("action chunk", want, have, WARN, fix)]
