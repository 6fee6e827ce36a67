"""A vla-eval model server's HELLO specs against an env's contract: errors when a rollout cannot
work, warnings for declared convention differences.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pytest_hud.robot.contract import Spaces

__all__ = ["SPECS_KEY", "SpecCheck", "camera_names", "check_specs", "is_image_spec", "spec_map"]

#: Where a contract's action feature carries the benchmark's specs.
SPECS_KEY = "vla_eval"
#: Formats vla-eval uses for image components.
IMAGE_FORMATS = ("rgb_hwc_uint8",)
#: Observation components that are not arrays the env must send.
TEXT_KEYS = ("language", "task_description", "instruction")
GENERIC_IMAGE_KEYS = ("image", "images", "rgb")


@dataclass
class SpecCheck:
    errors: list[str] = field(default_factory=list)
    #: (side, component, server's format, env's format)
    warnings: list[tuple[str, str, str, str]] = field(default_factory=list)

    def warning_table(self, server: str) -> str:
        head = f"vla-eval conventions differ between the model server {server} and the env:"
        rows = [f"  {'side':<12} {'component':<12} {'server':<28} env"]
        rows += [f"  {s:<12} {c:<12} {a:<28} {b}" for s, c, a, b in self.warnings]
        return "\n".join([head, *rows])


def is_image_spec(spec: Mapping[str, object]) -> bool:
    return spec.get("format") in IMAGE_FORMATS


def _short(name: str) -> str:
    return name.rsplit("/", 1)[-1].rsplit(".", 1)[-1]


def spec_map(value: object) -> dict[str, Mapping[str, object]]:
    """A HELLO's ``observation_spec`` or ``action_spec``: its components that are maps (a peer
    may send anything; none at all is an empty spec)."""
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, Mapping)}


def _dims(spec: Mapping[str, object]) -> int:
    """A component's ``dims`` (0: not declared)."""
    dims = spec.get("dims")
    return int(dims) if isinstance(dims, int | float) else 0


def camera_names(server_obs: Mapping[str, Mapping[str, object]], spaces: Spaces) -> dict[str, str]:
    """Env camera -> the ``images`` key the server reads: the server's image component
    names when it names its cameras (matched by name, else in order), else the env's
    own names (the last path component: ``images/agentview`` -> ``agentview``)."""
    cams = [f.name for f in spaces.cameras]
    wanted = [k for k, s in server_obs.items() if is_image_spec(s) and k not in GENERIC_IMAGE_KEYS]
    if not wanted:
        return {c: _short(c) for c in cams}
    by_name = {_short(c): c for c in cams}
    out: dict[str, str] = {}
    rest = [c for c in cams if _short(c) not in wanted]
    for key in wanted:
        cam = by_name.get(key) or (rest.pop(0) if rest else None)
        if cam is not None:
            out[cam] = key
    return out


def _state_size(spaces: Spaces) -> int | None:
    sizes = [f.size for f in spaces.robot_states]
    if any(s is None for s in sizes):
        return None
    return sum(int(s or 0) for s in sizes)


def _formats_differ(producer: Mapping[str, object], consumer: Mapping[str, object]) -> bool:
    accepts = consumer.get("accepts")
    if isinstance(accepts, list | tuple):
        return producer.get("format") not in accepts
    return producer.get("format") != consumer.get("format")


def check_specs(server_info: Mapping[str, object], spaces: Spaces, env_specs: object) -> SpecCheck:
    """Compare a HELLO payload with the env's spaces (and its vla-eval specs, if any)."""
    out = SpecCheck()
    server_obs = spec_map(server_info.get("observation_spec"))
    server_act = spec_map(server_info.get("action_spec"))
    cams = [f.name for f in spaces.cameras]
    images = [k for k, s in server_obs.items() if is_image_spec(s)]
    if len(images) > len(cams):
        out.errors.append(
            f"the server reads {len(images)} camera(s) {images}, the env sends {len(cams)} "
            f"{cams}: serve an env with those cameras, or a server that reads fewer"
        )
    state = server_obs.get("state") or server_obs.get("states")
    size = _state_size(spaces)
    if state is not None:
        dims = _dims(state)
        if not spaces.robot_states:
            out.errors.append(
                f"the server reads a state ({state.get('format')}, {dims or 'any'} dims), the "
                f"env sends none (its observations: {list(spaces.observation)}): add the state "
                "to the env's observation, or use a server that reads images only"
            )
        elif dims and size is not None and dims != size:
            out.errors.append(
                f"the server reads a {dims}-dim state ({state.get('format')}), the env's state "
                f"{[f.name for f in spaces.robot_states]} has {size}: pick a matching server "
                "checkpoint or adapt the env's state"
            )
    widths = [_dims(s) for s in server_act.values()]
    action = spaces.action_feature.size
    if widths and all(d > 0 for d in widths) and action is not None and sum(widths) != action:
        parts = ", ".join(f"{k} {d}" for k, d in zip(server_act, widths, strict=True))
        out.errors.append(
            f"the server writes {sum(widths)}-dim actions ({parts}), the env's action "
            f"{spaces.action_feature.name!r} has {action}: wrong checkpoint for this env, or "
            "an adapter that maps its actions is missing"
        )
    specs = env_specs if isinstance(env_specs, Mapping) else {}
    env_act = spec_map(specs.get("action_spec"))
    env_obs = spec_map(specs.get("observation_spec"))
    for key in server_act.keys() & env_act.keys():  # the server produces, the env consumes
        if _formats_differ(server_act[key], env_act[key]):
            out.warnings.append(
                ("action", key, str(server_act[key]["format"]), str(env_act[key]["format"]))
            )
    for key in server_obs.keys() & env_obs.keys():  # the env produces, the server consumes
        if key not in TEXT_KEYS and _formats_differ(env_obs[key], server_obs[key]):
            out.warnings.append(
                ("observation", key, str(server_obs[key]["format"]), str(env_obs[key]["format"]))
            )
    return out
