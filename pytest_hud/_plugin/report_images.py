"""Figures in the html report (``--hud-report-image``, the ``--hud-compare`` plot), embedded as
data URIs; bad files are usage errors at configure time.
"""

from __future__ import annotations

import base64
import html
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["Figure", "figure_path", "figures_html", "read_report_images"]

#: an image's leading bytes -> its MIME type (SVG is text: checked by its root element)
_MAGIC = {
    b"\x89PNG\r\n\x1a\n": "image/png",
    b"GIF87a": "image/gif",
    b"GIF89a": "image/gif",
    b"\xff\xd8\xff": "image/jpeg",
}
#: larger files are linked, not embedded (a report that grows by tens of MB stops loading)
EMBED_MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Figure:
    path: Path
    caption: str

    @classmethod
    def of(cls, path: Path) -> Figure:
        """A ``--hud-report-image`` file, captioned with its name."""
        return cls(path, path.name)


def _mime(path: Path) -> str | None:
    head = path.read_bytes()[:512]
    for magic, mime in _MAGIC.items():
        if head.startswith(magic):
            return mime
    text = head.decode("utf-8", "replace").lstrip().lower()
    if text.startswith("<svg") or (text.startswith("<?xml") and "<svg" in text):
        return "image/svg+xml"
    return None


def figure_path(config: pytest.Config, results: Path | None, artifacts: Path, name: str) -> Path:
    """Where the session writes its figure ``name`` (the A/B sweep, the comparison): beside
    the results JSON (``<results>.<name>.png``), else beside the html report, else in the
    session's ``artifacts`` folder, so it is found next to what the run produced."""
    if results is not None:
        return results.with_suffix(f".{name}.png")
    html = getattr(config.option, "htmlpath", None)
    if html:
        return Path(html).with_suffix(f".{name}.png")
    return artifacts / f"{name}.png"


def read_report_images(config: pytest.Config) -> tuple[Path, ...]:
    """The ``--hud-report-image`` paths (else the ini's), checked: each an existing image,
    and pytest-html writing a report to show them in."""
    raw: list[str] | None = config.getoption("hud_report_image")
    if not raw:
        ini = config.getini("hud_report_image")
        raw = str(ini).split() if ini not in (None, "", []) else []
    paths = [Path(p) for p in raw]
    for path in paths:
        if not path.is_file():
            raise pytest.UsageError(
                f"--hud-report-image: expected an image file, got {path} (does not exist); "
                "fix: pass the PNG to show, e.g. one written by "
                "'python -m pytest_hud compare A.json B.json --plot PATH'"
            )
        if _mime(path) is None:
            raise pytest.UsageError(
                f"--hud-report-image: expected a PNG, GIF, JPEG or SVG image, got {path} "
                f"(starts with {path.read_bytes()[:8]!r}); fix: pass an image file"
            )
    if paths and not getattr(config.option, "htmlpath", None):
        raise pytest.UsageError(
            "--hud-report-image shows images in pytest-html's report: expected "
            "--html=REPORT, got none; fix: add --html=report.html (pip install pytest-html)"
        )
    return tuple(paths)


def _figure(fig: Figure, report_dir: Path) -> str:
    link = html.escape(os.path.relpath(fig.path.resolve(), report_dir.resolve()))
    caption = f'{html.escape(fig.caption)} (<a href="{link}">{link}</a>)'
    try:
        mime, size = _mime(fig.path), fig.path.stat().st_size
    except OSError as exc:  # removed since configure: say so where the figure would be
        return f'<figure class="hud-figure"><figcaption>{caption}: {exc}</figcaption></figure>'
    if mime is None or size > EMBED_MAX_BYTES:
        why = "not an image" if mime is None else f"{size / 1e6:.1f} MB: linked, not embedded"
        return f'<figure class="hud-figure"><figcaption>{caption}: {why}</figcaption></figure>'
    data = base64.b64encode(fig.path.read_bytes()).decode()
    return (
        f'<figure class="hud-figure"><a href="{link}">'
        f'<img src="data:{mime};base64,{data}" alt="{html.escape(fig.caption)}"></a>'
        f"<figcaption>{caption}</figcaption></figure>"
    )


def figures_html(figures: Sequence[Figure], report: str | Path | None) -> str:
    """The report's figures section ('' without figures); links relative to ``report``."""
    if not figures:
        return ""
    report_dir = Path(report).parent if report else Path.cwd()
    style = (
        "<style>.hud-figure { margin: 8px 0; } .hud-figure img { max-width: 100%; "
        "border: 1px solid #ccc; } .hud-figure figcaption { font-size: 12px; }</style>"
    )
    body = "".join(_figure(f, report_dir) for f in figures)
    # inside .hud-summary: the summary's text colours (html_summary.STYLE) apply here too
    return f'{style}<div class="hud-summary hud-figures"><h3>Figures</h3>{body}</div>'
