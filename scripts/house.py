#!/usr/bin/env python3
"""Figures of the package's structure, read from its source with ``ast`` (nothing is imported):
modules, lines, import arrows between modules, cycles, private names imported across modules,
the core's imports by features, ``Any`` per 1,000 lines and the largest modules.

    python scripts/house.py [--json]

The redesign notes quote these before and after a change; the rules they measure are held by
tests/project (layers, cycles, feature boundary).
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pytest_hud"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, name: str, modules: set[str]) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for every pytest_hud import of ``path``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names if a.name in modules]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            taken = []
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in modules:
                    out.append((sub, []))
                else:
                    taken.append(alias.name)
            if taken and base in modules:
                out.append((base, taken))
    return [(m, names) for m, names in out if m != name]


def any_count(tree: ast.AST) -> int:
    """Uses of the name ``Any`` (``Any``, ``typing.Any``) in annotations and code."""
    count = 0
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
        if isinstance(node, ast.Name | ast.Attribute) and name == "Any":
            count += 1
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # string annotations ("dict[str, Any]") parsed where they parse
            try:
                inner = ast.parse(node.value, mode="eval")
            except SyntaxError:
                continue
            count += sum(isinstance(n, ast.Name) and n.id == "Any" for n in ast.walk(inner))
    return count


def cycles(graph: dict[str, set[str]]) -> int:
    """The number of strongly connected components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = 0
    counter = [0]

    def strong(v: str) -> None:
        nonlocal found
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            size = 0
            while True:
                w = stack.pop()
                on.discard(w)
                size += 1
                if w == v:
                    break
            found += size > 1

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def figures() -> dict[str, object]:
    paths = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    modules = set(paths)
    graph: dict[str, set[str]] = {}
    private = 0
    core_from_features = 0
    lines = 0
    anys = 0
    sizes: list[tuple[int, str]] = []
    for name, path in paths.items():
        text = path.read_text(encoding="utf-8")
        n = len(text.splitlines())
        lines += n
        sizes.append((n, str(path.relative_to(ROOT))))
        anys += any_count(ast.parse(text))
        found = imports(path, name, modules)
        graph[name] = {m for m, _ in found}
        for target, names in found:
            private += sum(1 for x in names if x.startswith("_") and not x.startswith("__"))
            if name.startswith("pytest_hud.features") and target.startswith("pytest_hud._plugin"):
                core_from_features += 1
    sizes.sort(reverse=True)
    return {
        "modules": len(paths),
        "lines": lines,
        "arrows": sum(len(v) for v in graph.values()),
        "cycles": cycles(graph),
        "private imports across modules": private,
        "core (_plugin) imports from features": core_from_features,
        "Any": anys,
        "Any per 1,000 lines": round(anys * 1000 / lines, 1),
        "modules over 600 lines": [f"{p} ({n})" for n, p in sizes if n > 600],
        "largest": [f"{p} ({n})" for n, p in sizes[:5]],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    out = figures()
    if parser.parse_args().json:
        print(json.dumps(out, indent=1))
    else:
        for key, value in out.items():
            print(f"{key}: {value}")
