"""The layer rule, checked from the imports (``ast``) of every module in pytest_hud/.

    plugin.py                           the hooks: wires the core and the features (only it
                                        lists them: features.FEATURES)
    features/                           one module or folder a feature (may import the core)
    fixtures/, _plugin/                 the pytest core: never imports a feature
    evaluation/                         results, gates, ledger, comparison: pure functions of rows
    runtime/KIND/                       the backends (subprocess, docker, modal, daytona, ray,
                                        tcp): each imports the runtime core, never another
    runtime/                            the core: placement, env servers, rollouts, the substrate
                                        lifecycle (backends.py's table names each backend's module
                                        by name; none is imported by the core)
    robot/sim/   |   robot/agent/       the env side and the agent side: never each other (the
                                        agent side includes the Ray policy replicas)
    robot/record/                       recording (agent-side observers)
    robot/wire/, robot/contract.py      the wire and the contract
    plumbing/, forkserver/, errors.py   the shared bottom (plumbing/cluster.py: joining Ray,
                                        for the runtime and the agent side's replicas alike)

Every import counts, including those inside functions (a lazy import is still a
dependency); only ``if TYPE_CHECKING:`` blocks are left out. Also: no cycle between
modules (not even through ``if TYPE_CHECKING:`` imports), and every public error pytest-hud
defines derives from ``pytest_hud.HudError``.
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


def imports_of(name: str, *, type_checking: bool = False) -> set[str]:
    """The pytest_hud modules ``name`` imports (a ``from pkg import sub`` names pkg.sub);
    with ``type_checking``, those imported under ``if TYPE_CHECKING:`` too."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node) and not type_checking:
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
            subs = {f"{base}.{a.name}" for a in node.names} & MODULES.keys()
            if len(subs) < len(node.names):  # a name defined in base itself, not a submodule
                found.add(base)
            found.update(subs)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: imports_of(name) for name in MODULES}
#: GRAPH with the imports under ``if TYPE_CHECKING:`` as well (for the cycle rule alone)
TYPING_GRAPH = {name: imports_of(name, type_checking=True) for name in MODULES}


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


#: Every top-level package and module of pytest_hud, by layer (top first). A module imports
#: only its own layer and those below; a new top-level name must be placed here.
LAYERS: list[tuple[str, ...]] = [
    # the public API, the entry points (python -m pytest_hud ...) and the shipped suites,
    # which are env modules written against the public API like a user's
    (
        "pytest_hud",
        "pytest_hud.__main__",
        "pytest_hud.api",
        "pytest_hud.serve",
        "pytest_hud.check",
        "pytest_hud.commands",
        "pytest_hud.doctor",
        "pytest_hud.watch",
        "pytest_hud.suites",
    ),
    # pytest: the hooks, the features, the core, the fixtures
    (
        "pytest_hud.plugin",
        "pytest_hud.hookspecs",
        "pytest_hud.features",
        "pytest_hud._plugin",
        "pytest_hud.fixtures",
    ),
    ("pytest_hud.interop",),  # LeRobot envs, vla-eval: over robot/ and runtime/
    ("pytest_hud.runtime", "pytest_hud.evaluation"),
    ("pytest_hud.robot",),
    ("pytest_hud.plumbing", "pytest_hud.forkserver", "pytest_hud.errors"),
]
#: Imports of the package's facade for its version string alone (no layer is pulled in).
_VERSION_ONLY = {("pytest_hud.interop.vla_eval.codec", "pytest_hud")}


def layer_of(module: str) -> int:
    best = max((p for layer in LAYERS for p in layer if under(module, p)), key=len, default=None)
    if best is None:
        raise KeyError(module)
    return next(i for i, layer in enumerate(LAYERS) if best in layer)


PLUGIN = ("pytest_hud.plugin", "pytest_hud._plugin", "pytest_hud.fixtures", "pytest_hud.features")
CORE = ("pytest_hud._plugin", "pytest_hud.fixtures")
BACKENDS = (
    "pytest_hud.runtime.docker",
    "pytest_hud.runtime.ray",
    "pytest_hud.runtime.modal",
    "pytest_hud.runtime.daytona",
    "pytest_hud.runtime.subprocess",
    "pytest_hud.runtime.tcp",
)
BOTTOM = ("pytest_hud.plumbing", "pytest_hud.forkserver", "pytest_hud.errors")


def test_the_graph_sees_imports() -> None:
    """The parser finds real edges (a broken parser would pass every rule below)."""
    assert "pytest_hud.robot.wire.codec" in GRAPH["pytest_hud.robot.sim.bridge"]
    assert "pytest_hud.runtime.task" in GRAPH["pytest_hud.runtime.modules"]
    assert "pytest_hud.runtime.task" in TYPING_GRAPH["pytest_hud.hookspecs"]
    assert "pytest_hud.runtime.task" not in GRAPH["pytest_hud.hookspecs"]
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
    """The backends' folders share only what the runtime core holds (the substrate
    lifecycle, readiness, the sandboxes' server, task and memory units): no helper is
    borrowed sideways."""
    bad = [
        line
        for backend in BACKENDS
        for line in violations(
            f"{backend} -> another backend", (backend,), tuple(b for b in BACKENDS if b != backend)
        )
    ]
    assert not bad, "\n".join(bad)


def test_the_runtime_core_imports_no_backend() -> None:
    """The runtime core imports no backend (backends.py's table names their modules, imported
    on first use; the package's lazy exports aside): it stays importable without any."""
    core = tuple(
        m
        for m in MODULES
        if under(m, "pytest_hud.runtime") and not under(m, *BACKENDS) and m != "pytest_hud.runtime"
    )
    bad = violations("runtime core -> backend", core, BACKENDS)
    assert not bad, "\n".join(bad)


def test_policy_replicas_are_agent_side() -> None:
    """The Ray policy replicas serve a model and build agents: they live in robot/agent/
    and reach Ray through the shared bottom, not through runtime/ray/."""
    assert "pytest_hud.robot.agent.replicas" in MODULES
    assert "pytest_hud.plumbing.cluster" in GRAPH["pytest_hud.robot.agent.replicas"]
    assert "pytest_hud.plumbing.cluster" in GRAPH["pytest_hud.runtime.ray.runtime"]


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


@pytest.mark.parametrize("graph", [GRAPH, TYPING_GRAPH], ids=["runtime", "type-checking"])
def test_no_import_cycles(graph: dict[str, set[str]]) -> None:
    """No cycle between modules, and none through ``if TYPE_CHECKING:`` imports either (a
    type shared both ways belongs in the lower module, or is a Protocol there)."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append([*stack[stack.index(dep) :], dep])
            elif dep not in state:
                walk(dep)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
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


def test_the_core_imports_no_feature() -> None:
    """A feature plugs into the core through hooks (hookspecs.py) and ``enable(session)``; the
    core never reaches for one, so a feature is removed by deleting its module and its line."""
    assert "pytest_hud.features.ab" in MODULES
    bad = violations("core -> feature", CORE, ("pytest_hud.features",))
    below = ("pytest_hud.runtime", "pytest_hud.robot", "pytest_hud.evaluation", *BOTTOM)
    bad += violations("below -> feature", below, ("pytest_hud.features",))
    assert not bad, "\n".join(bad)
    listing = [m for m, deps in GRAPH.items() if "pytest_hud.features" in deps]
    assert listing == ["pytest_hud.plugin"], listing  # the one place the table is read


#: A backend kind's own modules (besides runtime/backends.py, the table).
_HOMES = {
    "local": ("pytest_hud.runtime.local",),
    "subprocess": ("pytest_hud.runtime.subprocess",),
    "docker": ("pytest_hud.runtime.docker",),
    "modal": ("pytest_hud.runtime.modal",),
    "ray": ("pytest_hud.runtime.ray",),
}
#: Where a kind's word means something else: Ray's own package (a module the fork server
#: preloads), --hud-delegate's one value (the delegate feature runs rollouts as Ray tasks)
#: and the agent form openpi:ray:NAME (policy replicas on a Ray cluster).
_OTHER_MEANING = {("ray", "pytest_hud.forkserver.learn"), ("ray", "pytest_hud.features.delegate"),
                  ("ray", "pytest_hud.robot.agent.registry")}  # fmt: skip


def test_each_backend_is_named_only_by_the_table_and_its_own_modules() -> None:
    """``"docker"``, ``"docker:IMAGE"``... as a string: only in runtime/backends.py and the
    backend's own folder; everything else asks the table (kinds' URL schemes, ``tcp://``,
    ``ws://``, ``ray://``, are protocols, not names of a backend)."""
    from pytest_hud.runtime.backends import BACKENDS

    assert set(_HOMES) <= set(BACKENDS)
    found = []
    for name, path in MODULES.items():
        if name == "pytest_hud.runtime.backends":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            text = node.value
            for kind, homes in _HOMES.items():
                named = text == kind or (text.startswith(f"{kind}:") and "://" not in text)
                if named and not under(name, *homes) and (kind, name) not in _OTHER_MEANING:
                    found.append(f"{name}:{node.lineno}: {text!r}")
    assert not found, "\n".join(found)


def test_every_top_level_package_has_a_layer() -> None:
    tops = {".".join(m.split(".")[:2]) for m in MODULES}
    placed = {p for layer in LAYERS for p in layer}
    assert tops <= placed, f"place these in LAYERS: {sorted(tops - placed)}"


def test_no_module_imports_a_layer_above_its_own() -> None:
    """interop/ stands on robot/ and runtime/ (never the reverse), the plugin on all three,
    the entry points and the suites on the plugin; the plumbing on nothing."""
    bad = [
        f"{mod} (layer {layer_of(mod)}) imports {dep} (layer {layer_of(dep)})"
        for mod, deps in sorted(GRAPH.items())
        for dep in sorted(deps)
        if layer_of(dep) < layer_of(mod) and (mod, dep) not in _VERSION_ONLY
    ]
    assert not bad, "\n".join(bad)


#: Each SDK a backend wraps, and where it may be imported: its backend's folder, and for Ray
#: two more that say why (the agent side's policy replicas, and joining a cluster, shared by
#: both sides; ``robot/`` cannot import ``runtime/``).
_SDK_HOMES = {
    "docker": ("pytest_hud.runtime.docker",),
    "modal": ("pytest_hud.runtime.modal",),
    "daytona": ("pytest_hud.runtime.daytona",),
    "ray": (
        "pytest_hud.runtime.ray",
        "pytest_hud.robot.agent.replicas",
        "pytest_hud.plumbing.cluster",
    ),
}


def test_each_sdk_is_imported_only_by_its_backend() -> None:
    """``import docker`` (ray, modal, daytona), lazy imports included: only in the backend's
    folder (and where ``_SDK_HOMES`` says why not)."""
    found = []
    seen = set()
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            roots = []
            if isinstance(node, ast.Import):
                roots = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                roots = [node.module.split(".")[0]]
            for root in roots:
                if root in _SDK_HOMES:
                    seen.add(root)
                    if not under(name, *_SDK_HOMES[root]):
                        found.append(f"{name}:{node.lineno}: imports {root}")
    assert {"docker", "ray"} <= seen  # the scan sees the imports it polices
    assert not found, "\n".join(found)


def test_every_backend_lives_in_its_folder_and_gives_its_parts() -> None:
    """A kind's module is ``runtime/KIND/backend.py`` (the table's comment says why not for
    ``local``, the core's own, and ``ws``, tcp's client over a WebSocket) and defines its
    ``PARTS``, typed."""
    from pytest_hud.runtime.backends import BACKENDS, BackendParts

    homes = {"local": ".local", "ws": ".tcp.backend"}
    for kind, backend in BACKENDS.items():
        assert backend.module == homes.get(kind, f".{kind}.backend"), (kind, backend.module)
        assert isinstance(backend.parts, BackendParts), kind
        assert callable(backend.parts.provider), kind
