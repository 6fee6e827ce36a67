"""What a policy expects set against what an env's contract provides: the preflight table.

Shared by both sides: it reads a :class:`PolicySpec` (plain data the agent side builds
from a checkpoint or a server's metadata, :mod:`pytest_hud.robot.agent.expects`) and a
:class:`~pytest_hud.robot.contract.Contract`, and imports neither side. Each row is one
feature: what the policy expects, what the env provides, a verdict and the fix.

Verdicts: ``ok``; ``resize`` (a camera of another size: the policy sees a rescaled
image); ``warn`` (it runs, likely wrongly: missing normalization stats, states far
outside the checkpoint's stats, actions outside the env's range, a chunk longer than the
episode); ``MISMATCH`` (it cannot run: a camera or state the policy needs is missing or
of another size, an action of another size). Cameras are matched as
:class:`~pytest_hud.robot.agent.adapter.LeRobotAdapter` binds them: an explicit
``camera_map``, else by name (``observation/images/top`` is ``observation.images.top``),
else in contract order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_hud.errors import HudError
from pytest_hud.robot.contract import Contract, Feature, Spaces

__all__ = [
    "MISMATCH",
    "OK",
    "RESIZE",
    "STATE_SDS",
    "VERDICTS",
    "WARN",
    "CompatError",
    "CompatWarning",
    "Need",
    "PolicySpec",
    "Row",
    "Table",
    "action_rows",
    "chunk_row",
    "compare",
    "state_rows",
]

OK, RESIZE, WARN, MISMATCH = "ok", "resize", "warn", "MISMATCH"
VERDICTS = (OK, RESIZE, WARN, MISMATCH)
#: A state this many standard deviations from the checkpoint's mean is "far outside".
STATE_SDS = 10.0
#: Stats a normalization mode reads (LeRobot's NormalizationMode names).
NORM_STATS = {
    "MEAN_STD": ("mean", "std"),
    "MIN_MAX": ("min", "max"),
    "QUANTILES": ("q01", "q99"),
    "QUANTILE10": ("q10", "q90"),
}


class CompatError(HudError, ValueError):
    """The policy cannot run on the env (the message is the table: both sides, the fix)."""


class CompatWarning(HudError, UserWarning):
    """The policy runs on the env but likely wrongly (the message is the table with fixes)."""


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

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "kind": self.kind}
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

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"needs": [n.to_dict() for n in self.needs]}
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


@dataclass(frozen=True)
class Row:
    feature: str
    expects: str
    provides: str
    verdict: str
    fix: str = ""


@dataclass
class Table:
    """The rows for one policy against one env; ``title`` names both."""

    title: str
    rows: list[Row] = field(default_factory=list)

    @property
    def hard(self) -> list[Row]:
        return [r for r in self.rows if r.verdict == MISMATCH]

    @property
    def soft(self) -> list[Row]:
        return [r for r in self.rows if r.verdict in (RESIZE, WARN)]

    def render(self) -> str:
        head = ("feature", "policy expects", "env provides", "verdict")
        cells = [head, *[(r.feature, r.expects, r.provides, r.verdict) for r in self.rows]]
        widths = [min(max(len(c[i]) for c in cells), 44) for i in range(3)]
        lines = [self.title]
        for cell in cells:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(cell, widths, strict=False)))
            lines[-1] += "  " + cell[3]
        fixes = [r for r in self.rows if r.verdict != OK and r.fix]
        if fixes:
            lines.append("  fix:")
            lines += [f"    {r.feature}: {r.fix}" for r in fixes]
        return "\n".join(lines)


# -- the static comparison ------------------------------------------------------------------
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


def _range(f: Feature) -> tuple[np.ndarray, np.ndarray] | None:
    stats = f.stats or {}
    if "min" not in stats or "max" not in stats:
        return None
    return np.asarray(stats["min"], np.float64), np.asarray(stats["max"], np.float64)


def _span(low: np.ndarray, high: np.ndarray) -> str:
    lo, hi = float(np.min(low)), float(np.max(high))
    return f"[{lo:.4g}, {hi:.4g}]"


def _action_row(spec: PolicySpec, spaces: Spaces, env: str) -> list[Row]:
    act = spaces.action_feature
    span = _range(act)
    have = f"{act.name} {act.size or '?'}" + (f" in {_span(*span)}" if span else "")
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


# -- what the first steps of a real episode show ---------------------------------------------
def _state_matrix(spaces: Spaces, kind: str, frames: Iterable[Mapping[str, Any]]) -> np.ndarray:
    feats = spaces.robot_states if kind == "state" else spaces.env_states
    rows = [
        np.concatenate([np.asarray(f[x.name], np.float64).reshape(-1) for x in feats])
        for f in frames
        if all(x.name in f for x in feats)
    ]
    return np.stack(rows) if rows else np.zeros((0, 0))


def state_rows(spec: PolicySpec, spaces: Spaces, frames: Sequence[Mapping[str, Any]]) -> list[Row]:
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


def action_rows(spaces: Spaces, actions: Sequence[np.ndarray], source: str = "policy") -> list[Row]:
    """The actions the policy emitted on the first steps against the env's declared range."""
    act = spaces.action_feature
    span = _range(act)
    if span is None or not len(actions):
        return []
    low, high = span
    values = np.stack([np.asarray(a, np.float64).reshape(-1) for a in actions])
    if values.shape[1] != low.size:
        return []
    tol = 1e-3 * np.maximum(high - low, 1e-6)
    over = np.maximum(values - (high + tol), 0) + np.maximum((low - tol) - values, 0)
    seen = f"{len(values)} steps in {_span(values.min(0), values.max(0))}"
    want = f"{act.name} in {_span(low, high)}"
    if not np.any(over > 0):
        return [Row("actions emitted", seen, want, OK)]
    dims = sorted({int(d) for d in np.nonzero(over > 0)[1]})
    fix = (
        f"{source}'s actions leave the env's range on dims {dims} (e.g. dim {dims[0]}: "
        f"{values[:, dims[0]].min():.4g}..{values[:, dims[0]].max():.4g}, range "
        f"{low[dims[0]]:.4g}..{high[dims[0]]:.4g}): other units or scale (unnormalized "
        "actions, absolute vs delta, degrees vs radians); the env clips or rejects them"
    )
    return [Row("actions emitted", seen, want, WARN, fix)]


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
