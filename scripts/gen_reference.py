"""Reference pages generated from the code: the options table and the error tree.

The options come from the plugin's own ``pytest_addoption`` (run on pytest's parser), the
error tree from the class definitions under ``pytest_hud/`` (read with ``ast``, nothing
imported). Listed under ``hooks:`` in mkdocs.yml, it replaces ``<!-- hud-options -->`` and
``<!-- hud-errors -->`` at build time, so the pages cannot drift from the code; run as a
script it prints both. It reads the tree it sits in, not whatever pytest-hud is installed.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MARKER = "<!-- hud-options -->"
ERRORS_MARKER = "<!-- hud-errors -->"
#: pages another branch adds; the nav gains them under Reference once they exist
OPTIONAL_REFERENCE = {"Hooks": "reference/hooks.md"}


def hud_options() -> list[dict[str, Any]]:
    """Every ``--hud-*`` option as pytest's parser holds it: flags, ini name, attrs."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from _pytest.config import get_config

    config = get_config()
    # registering the plugin runs its (historic) pytest_addoption on the config's parser
    config.pluginmanager.import_plugin("pytest_hud.plugin")
    parser = config._parser
    inis = parser._inidict
    rows = []
    for group in [*parser._groups, parser._anonymous]:
        for option in group.options:
            flags = [n for n in option.names() if n.startswith("--hud-")]
            if not flags:
                continue
            attrs = option.attrs()
            dest = attrs.get("dest") or flags[0][2:].replace("-", "_")
            rows.append(
                {
                    "flags": flags,
                    "ini": dest if dest in inis else None,
                    "value": _value(attrs),
                    "help": str(attrs.get("help", "")).replace("%%", "%"),
                }
            )
    return sorted(rows, key=lambda r: r["flags"][0])


def _value(attrs: dict[str, Any]) -> str:
    action = attrs.get("action")  # older pytest keeps the action; newer ones argparse's fields
    if action in ("store_true", "store_false") or attrs.get("nargs") == 0:
        return "flag"
    if attrs.get("choices"):
        return " \\| ".join(str(c) for c in attrs["choices"])
    kind = attrs.get("type")
    name = getattr(kind, "__name__", None) if kind is not None else "text"
    text = {"int": "integer", "float": "number", "str": "text"}.get(str(name), str(name))
    if attrs.get("nargs") == "?":
        text = f"[{text}]"
    if action == "append":
        text += " (repeatable)"
    return text


def table() -> str:
    """One row per option; its ini key is its flag as ``hud_...`` (said where it is not)."""
    lines = ["| option | value | what it does |", "|---|---|---|"]
    for row in hud_options():
        flags = ", ".join(f"`{f}`" for f in row["flags"])
        derived = row["flags"][0][2:].replace("-", "_")
        if row["ini"] is None:
            flags += " (no ini key)"
        elif row["ini"] != derived:
            flags += f" (ini `{row['ini']}`)"
        help_ = row["help"].replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {flags} | {row['value']} | {help_} |")
    return "\n".join(lines) + "\n"


def error_classes() -> dict[str, tuple[list[str], str, str]]:
    """``{class: (base names, module, first docstring line)}`` for every class in the
    package whose bases (transitively) reach ``HudError``."""
    found: dict[str, tuple[list[str], str, str]] = {}
    for path in sorted((ROOT / "pytest_hud").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases]
                doc = (ast.get_docstring(node) or "").strip().split("\n")[0]
                found.setdefault(node.name, (bases, module, doc))

    def reaches(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name == "HudError":
            return True
        entry = found.get(name)
        return (
            entry is not None
            and name not in seen
            and any(reaches(b, seen | {name}) for b in entry[0])
        )

    return {n: e for n, e in found.items() if reaches(n)}


def error_tree() -> str:
    classes = error_classes()
    lines: list[str] = []

    def walk(name: str, depth: int) -> None:
        bases, module, doc = classes[name]
        builtin = [b for b in bases if b not in classes and b != "Exception"]
        also = f" (also {', '.join(builtin)})" if builtin else ""
        what = f": {doc}" if doc else ""
        lines.append(f"{'    ' * depth}- `{name}`{also}, `{module}`{what}")
        for child in sorted(n for n, e in classes.items() if name in e[0]):
            walk(child, depth + 1)

    walk("HudError", 0)
    return "\n".join(lines) + "\n"


# -- mkdocs hooks ---------------------------------------------------------------------------
def on_config(config: Any) -> Any:
    docs = Path(config["docs_dir"])
    for section in config["nav"] or []:
        if isinstance(section, dict) and "Reference" in section:
            pages = section["Reference"]
            listed = {p for entry in pages for p in entry.values()}
            for title, path in OPTIONAL_REFERENCE.items():
                if (docs / path).is_file() and path not in listed:
                    pages.insert(1, {title: path})
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, table())
    if ERRORS_MARKER in markdown:
        markdown = markdown.replace(ERRORS_MARKER, error_tree())
    return markdown


if __name__ == "__main__":
    sys.stdout.write(table() + "\n" + error_tree())
