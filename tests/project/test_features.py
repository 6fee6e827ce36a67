"""The feature boundary (pytest_hud/_plugin/feature_api.py), checked from the code: every feature
in the table has the shape the loader expects; a feature reaches the core through the one door
and never assigns to what the core owns; the core holds no feature's option; features never
find each other by plugin name; agent kinds are named only by the registry and their modules.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

import pytest_hud
from pytest_hud._plugin.feature_api import FeatureSettings, Hud
from pytest_hud._plugin.options import HudOptions
from pytest_hud._plugin.settings import options_of
from pytest_hud.features import FEATURES, feature

ROOT = Path(pytest_hud.__file__).parent
FEATURE_FILES = sorted(p for p in (ROOT / "features").rglob("*.py") if p.name != "__init__.py")
FEATURE_FILES += sorted((ROOT / "features").glob("*/__init__.py"))
CORE_FILES = sorted((ROOT / "_plugin").rglob("*.py"))
#: the names a feature holds the core's objects under (its door, the core's options); a
#: ``session`` in a feature is pytest's own (``session.shouldstop`` is pytest's API)
CORE_HANDLES = {"hud", "options"}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", FEATURES)
def test_every_feature_has_the_loaders_shape(name: str) -> None:
    """``Settings`` (None, or a FeatureSettings: a frozen dataclass whose option fields
    declare its flags), ``enable(settings, hud)`` and, where present,
    ``configure(settings, options)``."""
    module = feature(name)
    settings = module.Settings
    if settings is not None:
        assert issubclass(settings, FeatureSettings), f"{name}.Settings is no FeatureSettings"
        assert dataclasses.is_dataclass(settings), f"{name}.Settings is not a dataclass"
        assert settings.__dataclass_params__.frozen, f"{name}.Settings is not frozen"
        assert dataclasses.fields(settings), f"{name}.Settings declares nothing"
    assert list(inspect.signature(module.enable).parameters) == ["settings", "hud"]
    configure = getattr(module, "configure", None)
    if configure is not None:
        assert list(inspect.signature(configure).parameters) == ["settings", "options"]


def test_features_reach_the_core_through_the_door_alone() -> None:
    """The only core module a feature imports is ``_plugin.feature_api`` (the loader in
    features/__init__.py included)."""
    found = []
    for path in [*FEATURE_FILES, ROOT / "features" / "__init__.py"]:
        for node in ast.walk(_tree(path)):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if (
                    name.startswith("pytest_hud._plugin")
                    and name != "pytest_hud._plugin.feature_api"
                ):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports {name}")
    assert not found, "\n".join(found)


def test_no_feature_assigns_to_what_the_core_owns() -> None:
    """No ``hud.x = ...``, ``self.hud.x = ...`` or ``options.x = ...`` in a feature: it changes
    the session only by returning changed options from ``configure``."""
    found = []
    for path in FEATURE_FILES:
        for node in ast.walk(_tree(path)):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            for target in targets:
                if not isinstance(target, ast.Attribute):
                    continue
                base = target.value
                while isinstance(base, ast.Attribute):  # self.hud.options.x: the chain's names
                    if base.attr in CORE_HANDLES:
                        break
                    base = base.value
                name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
                if name in CORE_HANDLES:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(target)}")
    assert not found, "\n".join(found)


def test_the_door_and_the_options_cannot_be_changed(pytester: pytest.Pytester) -> None:
    """At run time too: the options are frozen and the door's facts are read-only."""
    config = pytester.parseconfigure()
    try:
        options = HudOptions.from_config(config)
        with pytest.raises(dataclasses.FrozenInstanceError):
            options.shared = 1  # type: ignore[misc]
        from pytest_hud._plugin.session import session_of

        hud = Hud(session_of(config))
        for name in ("options", "config", "arms", "rows", "order", "cases", "is_worker"):
            with pytest.raises(AttributeError):
                setattr(hud, name, None)
        with pytest.raises(TypeError):
            hud.rows["x"] = {"nodeid": "x", "outcome": "passed"}  # type: ignore[index]
    finally:
        config._ensure_unconfigure()


def _feature_flags() -> dict[str, str]:
    """Every feature's option: its dest -> the feature declaring it."""
    out = {}
    for name in FEATURES:
        settings = feature(name).Settings
        for _, opt in options_of(settings) if settings is not None else []:
            out[opt.dest] = name
    return out


def test_the_core_holds_no_features_option() -> None:
    """No option is declared twice, and no core module names a feature's option (its flag or
    its dest): a feature's flags are read, checked and held by the feature alone."""
    core = {opt.dest for _, opt in options_of(HudOptions)}
    features = _feature_flags()
    assert not core & set(features), sorted(core & set(features))
    assert "hud_record" in features and "hud_ledger" in features  # the scan sees features
    found = []
    for path in CORE_FILES:
        for node in ast.walk(_tree(path)):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            for dest, name in features.items():
                flag = "--" + dest.replace("_", "-")
                if node.value == dest or node.value.startswith(flag):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}'s {flag}")
    assert not found, "\n".join(found)


def test_features_never_find_each_other_by_name() -> None:
    """A feature asks a hook, never ``get_plugin("pytest-hud-...")`` (another feature's
    plugin, or its own, by the name the loader gave it)."""
    found = []
    for path in FEATURE_FILES:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "get_plugin":
                args = [a.value for a in node.args if isinstance(a, ast.Constant)]
                if any(str(a).startswith("pytest-hud") for a in args):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: get_plugin{args}")
    assert not found, "\n".join(found)


#: Where a kind's word means something else: the distribution and module named lerobot (a
#: package to version or find), the sims' entry points (env.lerobot(...), env.vla_eval(...)).
_OTHER_MEANING = {
    ("lerobot", "pytest_hud.evaluation.provenance"),
    ("lerobot", "pytest_hud.features.recording"),
    ("lerobot", "pytest_hud.robot.lerobot_version"),
    ("lerobot", "pytest_hud.runtime.environment"),
    ("vla-eval", "pytest_hud.runtime.environment"),
}
#: Each built-in or registered agent kind's own modules (besides the registry, which names them).
_KIND_HOMES = {
    "zero": (),
    "random": (),
    "openpi": ("pytest_hud.robot.agent.replicas",),
    "lerobot": ("pytest_hud.robot.agent.lerobot",),
    "pi05": ("pytest_hud.robot.agent.lerobot",),
    "vla-eval": ("pytest_hud.interop.vla_eval",),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_agent_kinds_are_named_only_by_the_registry_and_their_modules() -> None:
    """``"lerobot"``, ``"openpi:..."``... as a string: only in robot/agent/registry.py and the
    kind's own modules; everything else asks an AgentSpec (``model_backed``,
    ``checked_in_controller``, ``checkpoint``) or the registry's table."""
    from pytest_hud.robot.agent.registry import BUILTINS

    assert set(BUILTINS) <= set(_KIND_HOMES)
    found = []
    in_registry = 0
    for path in sorted(ROOT.rglob("*.py")):
        name = _module_name(path)
        for node in ast.walk(_tree(path)):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            for kind, homes in _KIND_HOMES.items():
                text = node.value
                named = text == kind or (text.startswith(f"{kind}:") and "://" not in text)
                home = any(name == h or name.startswith(h + ".") for h in homes)
                if named and name == "pytest_hud.robot.agent.registry":
                    in_registry += 1
                elif named and not home and (kind, name) not in _OTHER_MEANING:
                    found.append(f"{name}:{node.lineno}: {text!r}")
    assert in_registry >= len(BUILTINS)  # the scan sees the registry's own table
    assert not found, "\n".join(found)
