"""Write a bench's figures into docs/performance.md as a named table.

Each table sits between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``; writing it
again replaces that block, a new name is appended at the end of the page. Every block
says the machine (cores, CPU model, Python, load), the date and the exact command, because
a figure without them cannot be compared with anything.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PERFORMANCE = ROOT / "docs" / "performance.md"


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else platform's guess."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{os.cpu_count()} cores, {cpu_model()}, Python {platform.python_version()}, "
        f"load average {load} at the end"
    )


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    def cell(value: object) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |"]
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_table(
    name: str,
    title: str,
    header: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    note: str = "",
    argv: Sequence[str] | None = None,
    path: Path = PERFORMANCE,
) -> Path:
    """Write (or replace) table ``name`` in ``path``; ``argv`` defaults to this process's."""
    return write_tables(name, title, [("", header, rows, note)], argv=argv, path=path)


def write_tables(
    name: str,
    title: str,
    tables: Sequence[tuple[str, Sequence[str], Sequence[Sequence[object]], str]],
    *,
    note: str = "",
    argv: Sequence[str] | None = None,
    path: Path = PERFORMANCE,
) -> Path:
    """Write (or replace) block ``name``: one machine, date and command over several
    ``(subtitle, header, rows, note)`` tables (a subtitle becomes a #### heading), then
    ``note``."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
        raise ValueError(f"a table name is lowercase letters, digits and dashes, got {name!r}")
    command = shlex.join(["python", *(sys.argv if argv is None else argv)])
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    body: list[str] = []
    for subtitle, header, rows, table_note in tables:
        body += [f"#### {subtitle}", ""] if subtitle else []
        body += [markdown_table(header, rows), *(["", table_note] if table_note else []), ""]
    block = "\n".join(
        [
            start,
            f"### {title}",
            "",
            f"- machine: {machine()}",
            f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
            f"- command: `{command}`",
            "",
            *body[:-1],
            *(["", note] if note else []),
            end,
        ]
    )
    text = path.read_text() if path.exists() else "# Performance\n"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)
    return path
