"""The preflight rows that need no run: a policy's cameras, states and action against the contract
(cameras matched as the adapter binds them), and its stats.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pytest_hud.robot.compat.policy import PolicySpec
from pytest_hud.robot.compat.table import MISMATCH, OK, RESIZE, WARN, Row, Table
from pytest_hud.robot.contract import Contract, Feature, Spaces

__all__ = ["NORM_STATS", "compare", "span_text", "value_range"]

#: Stats a normalization mode reads (LeRobot's NormalizationMode names).
NORM_STATS = {
    "MEAN_STD": ("mean", "std"),
    "MIN_MAX": ("min", "max"),
    "QUANTILES": ("q01", "q99"),
    "QUANTILE10": ("q10", "q90"),
}


def _hwc(shape: Sequence[int] | None) -> str:
    return "x".join(str(d) for d in shape) if shape else "?"


def _camera(f: Feature) -> str:
    return f"{f.name} {_hwc(f.shape)} {f.type}"


def _dotted(name: str) -> str:
    return name.replace("/", ".")


def _match_cameras(
    spec: PolicySpec, cameras: list[Feature]
) -> tuple[dict[str, Feature], str | None]:
    """Policy key -> env camera, or an error (the adapter would refuse the binding)."""
    keys = [n.key for n in spec.of_kind("camera")]
    by_name = {c.name: c for c in cameras}
    if spec.camera_map:
        return {key: by_name[cam] for cam, key in spec.camera_map.items() if cam in by_name}, None
    if not keys:
        return {}, None
    if sorted(_dotted(c.name) for c in cameras) == sorted(keys):
        return {_dotted(c.name): c for c in cameras}, None
    if cameras and len(cameras) != len(keys):
        names = [c.name for c in cameras]
        return {}, (
            f"the policy reads {len(keys)} camera(s) {keys}, the env sends {len(cameras)} "
            f"{names}: pass camera_map={{env camera: policy key}} to the adapter, or serve "
            "the env with matching cameras"
        )
    return dict(zip(keys, cameras, strict=False)), None


def _camera_rows(spec: PolicySpec, spaces: Spaces, env: str) -> list[Row]:
    matched, refused = _match_cameras(spec, spaces.cameras)
    rows = []
    for need in spec.of_kind("camera"):
        want = f"camera {_hwc(need.shape)}"
        cam = matched.get(need.key)
        if cam is None:
            have = [c.name for c in spaces.cameras]
            fix = refused or (
                f"add a camera to env {env!r} (an observation with type rgb, shape "
                f"{list(need.shape or [])}) named {need.key.replace('.', '/')!r}"
                + (
                    f", or map one of its cameras {have} with "
                    f"camera_map={{env camera: {need.key!r}}}"
                    if have
                    else ""
                )
            )
            rows.append(Row(need.key, want, "no camera" if not have else "-", MISMATCH, fix))
        elif need.shape is None or cam.shape is None:
            rows.append(
                Row(
                    need.key,
                    want,
                    _camera(cam),
                    OK if need.shape is None else WARN,
                    f"declare the shape of env camera {cam.name!r} in the contract",
                )
            )
        elif len(cam.shape) == 3 and need.shape[2] != cam.shape[2]:
            rows.append(
                Row(
                    need.key,
                    want,
                    _camera(cam),
                    MISMATCH,
                    f"the policy reads {need.shape[2]} channel(s), env camera "
                    f"{cam.name!r} has {cam.shape[2]}: render it as "
                    f"{'rgb' if need.shape[2] == 3 else 'gray'}",
                )
            )
        elif tuple(cam.shape[:2]) != tuple(need.shape[:2]):
            (h, w), (eh, ew) = need.shape[:2], cam.shape[:2]
            fix = (
                f"the policy was trained on {w}x{h} images (width x height), env camera "
                f"{cam.name!r} renders {ew}x{eh}: the policy sees them rescaled; render "
                f"it at {w}x{h} in the env"
            )
            rows.append(Row(need.key, want, _camera(cam), RESIZE, fix))
        else:
            rows.append(Row(need.key, want, _camera(cam), OK))
    return rows


def _sizes(features: list[Feature]) -> int | None:
    sizes = [f.size for f in features]
    return None if any(s is None for s in sizes) else sum(int(s or 0) for s in sizes)


def _state_rows(spec: PolicySpec, spaces: Spaces, env: str) -> list[Row]:
    rows = []
    for need in [*spec.of_kind("state"), *spec.of_kind("env_state")]:
        feats = spaces.robot_states if need.kind == "state" else spaces.env_states
        size = _sizes(feats)
        want = f"{need.kind.replace('_', ' ')} {need.size or '?'}"
        names = ", ".join(f.name for f in feats)
        have = f"{names} {size if size is not None else '?'}"
        where = "observation" if need.kind == "state" else "observation named environment_state"
        if not feats:
            fix = (
                f"add a {need.size or 'N'}-dim {where} to env {env!r} (the policy's "
                f"{need.key!r}), or use a checkpoint trained without it"
            )
            rows.append(Row(need.key, want, "none", MISMATCH, fix))
        elif size is None or need.size is None:
            rows.append(Row(need.key, want, have, WARN, f"declare the shapes of {names}"))
        elif size != need.size:
            fix = (
                f"the policy reads {need.size} values, env {env!r} sends {size} ({names}): "
                "use a checkpoint trained on this env, or change the env's state to the "
                "checkpoint's"
            )
            rows.append(Row(need.key, want, have, MISMATCH, fix))
        else:
            rows.append(Row(need.key, want, have, OK))
    return rows


def value_range(f: Feature) -> tuple[np.ndarray, np.ndarray] | None:
    stats = f.stats or {}
    if "min" not in stats or "max" not in stats:
        return None
    return np.asarray(stats["min"], np.float64), np.asarray(stats["max"], np.float64)


def span_text(low: np.ndarray, high: np.ndarray) -> str:
    lo, hi = float(np.min(low)), float(np.max(high))
    return f"[{lo:.4g}, {hi:.4g}]"


def _action_row(spec: PolicySpec, spaces: Spaces, env: str) -> list[Row]:
    act = spaces.action_feature
    span = value_range(act)
    have = f"{act.name} {act.size or '?'}" + (f" in {span_text(*span)}" if span else "")
    rows = []
    for need in spec.of_kind("action"):
        want = f"action {need.size or '?'}"
        if need.size is not None and act.size is not None and need.size != act.size:
            fix = (
                f"the policy writes {need.size} values per action, env {env!r} takes "
                f"{act.size}: wrong checkpoint for this env, or an adapter that maps its "
                "actions onto the env's is missing"
            )
            rows.append(Row(need.key, want, have, MISMATCH, fix))
        else:
            rows.append(Row(need.key, want, have, OK))
    return rows


def _stats_row(spec: PolicySpec) -> list[Row]:
    normalized = [n for n in spec.needs if n.norm in NORM_STATS]
    if not normalized:
        return []
    missing = [
        f"{n.key} ({'/'.join(NORM_STATS[str(n.norm)])})"
        for n in normalized
        if not all(k in (n.stats or {}) for k in NORM_STATS[str(n.norm)])
    ]
    want = f"stats for {len(normalized)} normalized feature(s)"
    if not missing:
        return [Row("normalization stats", want, "-", OK)]
    fix = (
        f"the checkpoint has no stats for {', '.join(missing)}: its normalizer passes them "
        "through unnormalized; save the processors with the training dataset's stats "
        "(make_pre_post_processors(config, dataset_stats=...))"
    )
    return [Row("normalization stats", want, f"missing {len(missing)}", WARN, fix)]


def compare(spec: PolicySpec, contract: Contract, env: str) -> Table:
    """The rows that need no run: cameras, states, the action, normalization stats."""
    spaces = contract.spaces()
    table = Table(f"pytest-hud preflight: {spec.source} on env {env!r}")
    table.rows += _camera_rows(spec, spaces, env)
    table.rows += _state_rows(spec, spaces, env)
    table.rows += _action_row(spec, spaces, env)
    table.rows += _stats_row(spec)
    return table
