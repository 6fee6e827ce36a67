"""The layer rule, checked from the imports (``ast``) of every module in pytest_hud/.

    plugin.py, fixtures/, _plugin/      pytest integration (may import everything below)
    evaluation/                         results, gates, ledger, comparison: pure functions of rows
    runtime/docker/ | ray/ | sandbox/   the backends: each imports the runtime core, never another
    runtime/                            the core: placement, env servers, rollouts, the substrate
                                        lifecycle (only placement.py, the resolver, names backends)
    robot/sim/   |   robot/agent/       the env side and the agent side: never each other (the
                                        agent side includes the Ray policy replicas)
    robot/record/                       recording (agent-side observers)
    robot/wire/, robot/contract.py      the wire and the contract
    loader, process, threads, rpc,      the shared bottom (cluster: joining Ray, for the
    errors, stats, cluster              runtime and the agent side's replicas alike)

Every import counts, including those inside functions (a lazy import is still a
dependency); only ``if TYPE_CHECKING:`` blocks are left out. Also: no cycle between
modules, and every public error pytest-hud defines derives from ``pytest_hud.HudError``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import pytest_hud

ROOT = Path(pytest_hud.__file__).parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(name: str) -> set[str]:
    """The pytest_hud modules ``name`` imports (a ``from pkg import sub`` names pkg.sub)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: imports_of(name) for name in MODULES}


def under(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def violations(rule: str, source: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{rule}: {mod} imports {dep}"
        for mod, deps in sorted(GRAPH.items())
        if under(mod, *source)
        for dep in sorted(deps)
        if under(dep, *forbidden)
    ]


PLUGIN = ("pytest_hud.plugin", "pytest_hud._plugin", "pytest_hud.fixtures")
BACKENDS = ("pytest_hud.runtime.docker", "pytest_hud.runtime.ray", "pytest_hud.runtime.sandbox")
BOTTOM = (
    "pytest_hud.cluster",
    "pytest_hud.errors",
    "pytest_hud.loader",
    "pytest_hud.process",
    "pytest_hud.rpc",
    "pytest_hud.stats",
    "pytest_hud.threads",
)


def test_the_graph_sees_imports() -> None:
    """The parser finds real edges (a broken parser would pass every rule below)."""
    assert "pytest_hud.robot.wire.codec" in GRAPH["pytest_hud.robot.sim.bridge"]
    assert "pytest_hud.runtime.modules" in GRAPH["pytest_hud.runtime.task"]
    assert "pytest_hud._plugin.session" in GRAPH["pytest_hud.plugin"]


def test_sim_and_agent_never_import_each_other() -> None:
    sim, agent = ("pytest_hud.robot.sim",), ("pytest_hud.robot.agent",)
    bad = violations("sim -> agent", sim, agent) + violations("agent -> sim", agent, sim)
    assert not bad, "\n".join(bad)


def test_robot_never_imports_upward() -> None:
    bad = violations(
        "robot -> runtime/plugin", ("pytest_hud.robot",), ("pytest_hud.runtime", *PLUGIN)
    )
    assert not bad, "\n".join(bad)


def test_wire_and_contract_are_the_bottom_of_robot() -> None:
    bottom = ("pytest_hud.robot.wire", "pytest_hud.robot.contract")
    above = ("pytest_hud.robot.sim", "pytest_hud.robot.agent", "pytest_hud.robot.record")
    bad = violations("wire/contract -> robot above", bottom, above)
    assert not bad, "\n".join(bad)


def test_runtime_never_imports_the_plugin() -> None:
    bad = violations("runtime -> plugin", ("pytest_hud.runtime",), PLUGIN)
    assert not bad, "\n".join(bad)


def test_runtime_backends_never_import_each_other() -> None:
    """docker/, ray/ and sandbox/ share only what the runtime core holds (the substrate
    lifecycle, readiness, task and memory units): no helper is borrowed sideways."""
    bad = [
        line
        for backend in BACKENDS
        for line in violations(
            f"{backend} -> another backend", (backend,), tuple(b for b in BACKENDS if b != backend)
        )
    ]
    assert not bad, "\n".join(bad)


def test_the_runtime_core_names_no_backend_but_in_the_resolver() -> None:
    """Only placement.py (``--hud-runtime=docker|modal|ray`` -> a provider) and the package's
    lazy exports name a backend; the core stays importable without any of them."""
    core = tuple(
        m
        for m in MODULES
        if under(m, "pytest_hud.runtime")
        and not under(m, *BACKENDS)
        and m not in ("pytest_hud.runtime", "pytest_hud.runtime.placement")
    )
    bad = violations("runtime core -> backend", core, BACKENDS)
    assert not bad, "\n".join(bad)


def test_policy_replicas_are_agent_side() -> None:
    """The Ray policy replicas serve a model and build agents: they live in robot/agent/
    and reach Ray through the shared bottom, not through runtime/ray/."""
    assert "pytest_hud.robot.agent.replicas" in MODULES
    assert "pytest_hud.cluster" in GRAPH["pytest_hud.robot.agent.replicas"]
    assert "pytest_hud.cluster" in GRAPH["pytest_hud.runtime.ray.runtime"]


def test_the_shared_bottom_imports_nothing_above() -> None:
    above = ("pytest_hud.runtime", "pytest_hud.robot", "pytest_hud.evaluation", *PLUGIN)
    bad = violations("bottom -> above", BOTTOM, above)
    assert not bad, "\n".join(bad)


def test_evaluation_is_pure_rows() -> None:
    """Gates, ledgers and comparisons work on result rows alone (a CLI can use them
    without pytest, a runtime or a model)."""
    above = ("pytest_hud.runtime", "pytest_hud.robot", *PLUGIN)
    bad = violations("evaluation -> runtime/robot/plugin", ("pytest_hud.evaluation",), above)
    assert not bad, "\n".join(bad)


def test_no_import_cycles() -> None:
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(GRAPH[node]):
            if state.get(dep) == 1:
                cycles.append([*stack[stack.index(dep) :], dep])
            elif dep not in state:
                walk(dep)
        stack.pop()
        state[node] = 2

    for name in sorted(GRAPH):
        if name not in state:
            walk(name)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("name", sorted(n for n in MODULES if "__main__" not in n))
def test_every_error_derives_from_hud_error(name: str) -> None:
    module = importlib.import_module(name)
    loose = [
        obj.__qualname__
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and issubclass(obj, BaseException)
        and obj.__module__ == name
        and not obj.__name__.startswith("_")
        and not issubclass(obj, pytest_hud.HudError)
    ]
    assert not loose, f"{name} defines errors outside the HudError hierarchy: {loose}"
