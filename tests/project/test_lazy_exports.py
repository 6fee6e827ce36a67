"""Package exports import on first use (pytest_hud/plumbing/lazy.py): every exported name still
resolves to its defining module's object, and a process that serves an env (an env
server, a sim) no longer imports the agent stack or the other runtimes' glue."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from pytest_hud.plumbing.lazy import _table

PACKAGES = ["pytest_hud", "pytest_hud.runtime", "pytest_hud.robot"]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_export_resolves_to_its_defining_object(name: str) -> None:
    package = importlib.import_module(name)
    table = _table(package.__file__)
    assert set(package.__all__) - {"HudError", "__version__"} <= set(table)
    for export, (module, attr) in table.items():
        assert getattr(package, export) is getattr(importlib.import_module(module), attr)
        assert export in dir(package)
    with pytest.raises(AttributeError, match=f"module '{name}' has no attribute 'Nope'"):
        package.Nope  # noqa: B018


def test_a_name_shared_with_a_submodule_is_the_export_not_the_module() -> None:
    import pytest_hud.runtime.rollout  # noqa: F401 - the submodule, imported first
    from pytest_hud.runtime import rollout

    assert callable(rollout) and rollout.__module__ == "pytest_hud.runtime.rollout"


@pytest.mark.parametrize("entry", ["pytest_hud.serve", "pytest_hud.robot.sim.program"])
def test_serving_an_env_imports_no_agent_stack_and_no_other_runtime(entry: str) -> None:
    code = f"import json, sys, {entry}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    loaded = set(json.loads(out))
    unwanted = {
        "pytest_hud.robot.agent.agent",
        "pytest_hud.robot.agent.batching",
        "pytest_hud.runtime.docker",
        "pytest_hud.runtime.modal",
        "pytest_hud.runtime.ray",
        "pytest_hud.runtime.daytona",
        "torch",
    }
    assert loaded & unwanted == set()
