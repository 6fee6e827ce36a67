"""Files a session reads but did not write (issue 39 #5): a ledger given to ``--hud-resume``, a
results JSON given to ``--hud-baseline`` or ``compare``. A wrong type is one error naming the
file, the line or row and the field (exit 4, a usage error; never a traceback, never exit 1);
a row of the right types but hostile content reaches the report escaped, and a path in it
is embedded only when it is one of the session's own episode GIFs."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from line_suite import ENV, run

from pytest_hud.evaluation import ledger_file as ledger
from pytest_hud.evaluation.results import RowError, check_row, read_results

TWO_ROWS = """
import pytest
from line_env import reach


@pytest.mark.hud(tasks=[reach.task(goal=0.0), reach.task(goal=0.5)])
def test_reach(hud_result):
    pass
"""
SCRIPT = "<script>alert('hud')</script>"
IMG = "<img src=x onerror=alert(1)>"
GIF = b"GIF89a" + b"\x01\x00\x01\x00\x80\x00\x00" + b"SECRET-PAYLOAD-" * 8


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(line_env=ENV, test_reach=TWO_ROWS)
    pytester.makeconftest("import line_env  # noqa: F401\n")
    pytester.makeini("[pytest]\nhud_agent = zero\n")
    return pytester


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _recorded(suite: pytest.Pytester) -> Path:
    led = suite.path / "run.ledger.jsonl"
    run(suite, f"--hud-ledger={led}").assert_outcomes(passed=2)
    return led


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("steps", IMG),
        ("success", "yes"),
        ("score", "1.0"),
        ("args", ["goal"]),
        ("nodeid", 7),
        ("outcome", "won"),
        ("duration", None),
        ("video", 3),
    ],
)
def test_a_ledger_field_of_the_wrong_type_is_one_usage_error_naming_it(
    suite: pytest.Pytester, field: str, value: Any
) -> None:
    led = _recorded(suite)
    records = _records(led)
    number = next(n for n, r in enumerate(records, 1) if r["kind"] == "episode")
    records[number - 1][field] = value
    _write(led, records)
    result = run(suite, f"--hud-resume={led}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    err = result.stderr.str()
    assert f"{led} line {number}: field {field!r}: expected" in err, err
    out = result.stdout.str() + err
    assert "Traceback" not in out and "INTERNALERROR" not in out


def test_a_hostile_ledger_reaches_the_report_escaped_and_embeds_only_the_sessions_gifs(
    suite: pytest.Pytester,
) -> None:
    """Right types, hostile content: script in every text field a report shows, and a
    ``video`` naming a GIF outside the session's ``.hud/videos``. Resumed, the report holds
    the script as text and not the foreign file; the same GIF inside ``.hud/videos`` is
    embedded (so the check is what keeps the first one out)."""
    led = _recorded(suite)
    foreign = suite.path / "elsewhere" / "secret.gif"
    foreign.parent.mkdir()
    foreign.write_bytes(GIF)
    own = suite.path / ".hud" / "videos" / "own.gif"
    own.parent.mkdir(parents=True, exist_ok=True)
    own.write_bytes(b"GIF89a" + b"THE-SESSIONS-OWN-GIF-" * 4)
    records = _records(led)
    episodes = [r for r in records if r["kind"] == "episode"]
    for record, video in zip(episodes, (foreign, own), strict=True):
        record.update(env=SCRIPT, prompt=SCRIPT, task_id=IMG, video=str(video))
        record["args"] = {**record["args"], "note": IMG}
    _write(led, records)
    html = suite.path / "report.html"
    result = run(suite, f"--hud-resume={led}", f"--html={html}", "--self-contained-html")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    assert result.parseoutcomes()["resumed"] == 2  # both rows kept from the ledger, none run
    page = html.read_text()
    for payload in (SCRIPT, IMG):
        assert payload not in page, f"{payload} reached the report unescaped"
    assert "&lt;script&gt;alert(" in page  # shown, as text
    assert base64.b64encode(GIF).decode()[:40] not in page  # the foreign file: never read
    assert base64.b64encode(own.read_bytes()).decode()[:40] in page  # the session's own


def test_a_non_gif_under_the_sessions_videos_is_not_embedded(suite: pytest.Pytester) -> None:
    led = _recorded(suite)
    passwd = suite.path / ".hud" / "videos" / "passwd.gif"
    passwd.parent.mkdir(parents=True, exist_ok=True)
    passwd.write_text("root:x:0:0:root:/root:/bin/sh\n")
    records = _records(led)
    for record in records:
        if record["kind"] == "episode":
            record["video"] = str(passwd)
    _write(led, records)
    html = suite.path / "report.html"
    run(suite, f"--hud-resume={led}", f"--html={html}", "--self-contained-html")
    assert base64.b64encode(passwd.read_bytes()).decode()[:24] not in html.read_text()


def _results(suite: pytest.Pytester, name: str) -> Path:
    out = suite.path / name
    run(suite, f"--hud-results={out}").assert_outcomes(passed=2)
    return out


@pytest.mark.parametrize(("field", "value"), [("steps", IMG), ("success", "no"), ("seed", {})])
def test_compare_exits_4_naming_the_field_of_a_hostile_results_file(
    suite: pytest.Pytester, field: str, value: Any
) -> None:
    """``compare`` of a results file with a wrong type: exit 4 (never 1, which
    ``--fail-on-drop`` gives a drop, so a CI gate cannot read a crash as a drop)."""
    base, new = _results(suite, "base.json"), _results(suite, "new.json")
    doc = json.loads(new.read_text())
    doc["rollouts"][1][field] = value
    new.write_text(json.dumps(doc))
    done = subprocess.run(
        [sys.executable, "-m", "pytest_hud", "compare", str(base), str(new), "--fail-on-drop=1"],
        capture_output=True, text=True, timeout=120, check=False, cwd=suite.path,
    )  # fmt: skip
    assert done.returncode == 4, done.stderr
    assert f"{new} rollouts[1]: field {field!r}: expected" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_hostile_baseline_is_one_usage_error(suite: pytest.Pytester) -> None:
    base = _results(suite, "base.json")
    doc = json.loads(base.read_text())
    task = next(iter(doc["per_task"]))
    doc["per_task"][task]["successes"] = "<b>all</b>"
    base.write_text(json.dumps(doc))
    result = run(suite, f"--hud-baseline={base}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"per_task[{task!r}].successes: expected a count" in result.stderr.str()


def test_the_reader_takes_what_pytest_hud_writes(suite: pytest.Pytester) -> None:
    """The schema is the Row the plugin writes: its own files pass, row by row."""
    led = _recorded(suite)
    assert len(ledger.read(led).episodes) == 2
    doc = read_results(_results(suite, "r.json"))
    assert len(doc["rollouts"]) == 2
    with pytest.raises(RowError, match="field 'steps'"):
        check_row({**doc["rollouts"][0], "steps": True}, "r.json rollouts[0]")


# -- issue 52: nesting past the reader's bound, and escape sequences for the terminal ----------
DEEP = "[" * 100_000 + "]" * 100_000
#: what a file's text would do to a terminal: set the title, clear the screen, write the clipboard
ESCAPES = "\x1b]2;pwned\x07\x1b[2J\x1b]52;c;cHduZWQ=\x07"


def _nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def _compare(suite: pytest.Pytester, *paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_hud", "compare", *map(str, paths), "--fail-on-drop=1"],
        capture_output=True, text=True, timeout=120, check=False, cwd=suite.path,
    )  # fmt: skip


def test_a_deeply_nested_ledger_or_results_file_is_one_usage_error(suite: pytest.Pytester) -> None:
    """Issue 52 #8: a ledger line of ``"[" * 100000`` ended ``--hud-resume`` in INTERNALERROR
    (exit 3, not the documented 4), and ``compare`` of such a results file printed a
    traceback and exited 1, the code of a real drop. Now any file nested past the readers'
    bound (64) is one error naming it: exit 4, from the plugin and from ``compare``."""
    led = _recorded(suite)
    lines = led.read_text().splitlines(keepends=True)
    led.write_text("".join([lines[0], DEEP + "\n", *lines[1:]]))
    result = run(suite, f"--hud-resume={led}")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-2000:]
    assert f"{led} line 2: expected one JSON object per line" in out
    assert "nested more than 64" in out
    assert "Traceback" not in out and "INTERNALERROR" not in out
    # the same for compare, the whole file or a field nested under the parser's own limit
    base, new = _results(suite, "base.json"), _results(suite, "new.json")
    new.write_text(DEEP)
    done = _compare(suite, base, new)
    assert done.returncode == 4, done.stderr
    assert "nested more than 64" in done.stderr and "Traceback" not in done.stderr
    doc = json.loads(base.read_text())
    doc["rollouts"][0]["args"]["deep"] = _nested(200)
    new.write_text(json.dumps(doc))
    done = _compare(suite, base, new)
    assert done.returncode == 4 and "nested more than 64" in done.stderr, done.stderr


def test_escape_sequences_in_files_reach_the_terminal_as_text(suite: pytest.Pytester) -> None:
    """Issue 52 #7: a resumed ledger's rows and a results file's task names reached the
    terminal raw, in the hud table and in ``compare``'s: a file could set the window title,
    clear the screen or write the clipboard. Both now show them as visible escapes."""
    led = _recorded(suite)
    records = _records(led)
    for record in records:
        if record["kind"] == "episode":
            record.update(env="line" + ESCAPES, task="line" + ESCAPES + "/reach")
    _write(led, records)
    result = run(suite, f"--hud-resume={led}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    assert result.parseoutcomes()["resumed"] == 2  # both rows kept from the ledger, none run
    out = result.stdout.str() + result.stderr.str()
    assert "\x1b" not in out and "\x07" not in out, "a ledger's escape reached the terminal"
    assert "line\\x1b]2;pwned\\x07\\x1b[2J" in result.stdout.str()  # the hud table, as text
    base, new = _results(suite, "base.json"), _results(suite, "new.json")
    for path in (base, new):
        doc = json.loads(path.read_text())
        for row in doc["rollouts"]:
            row["env"] = "line" + ESCAPES  # the label compare shows: env/template
        path.write_text(json.dumps(doc))
    done = _compare(suite, base, new)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout
    assert "line\\x1b]2;pwned\\x07" in done.stdout


# -- fuzzing the readers' depth bound ---------------------------------------------------------
_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(
    depth=st.integers(0, 3000),
    value=_JSON,
    junk=st.text(alphabet='[]{}",:0a\\ ', max_size=200),
    where=st.sampled_from(["args", "line", "junk"]),
)
def test_a_ledger_of_any_depth_reads_or_is_one_ledger_error(
    depth: int, value: Any, junk: str, where: str
) -> None:
    """Whatever a ledger's line nests, and however deep, the reader returns its records or
    raises LedgerError (never RecursionError); past 64 levels it is refused as nested."""
    from pytest_hud.plumbing.jsonread import MAX_DEPTH

    episode = {"kind": "episode", "v": 1, "run": "r", "nodeid": "t.py::t", "outcome": "passed"}
    if where == "args":
        line = json.dumps({**episode, "args": {"x": value, "deep": _nested(min(depth, 500))}})
    elif where == "line":
        line = "[" * depth + json.dumps(value) + "]" * depth
    else:
        line = junk
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "l.jsonl"
        path.write_text(json.dumps({"kind": "run", "v": 1, "run": "r", "started": 0}) + "\n")
        with path.open("a") as f:
            f.write(line + "\n")
        try:
            ledger.read(path)
        except ledger.LedgerError as exc:
            if where == "args" and min(depth, 500) + 2 > MAX_DEPTH:
                assert "nested more than" in str(exc)
        else:
            assert not (where == "args" and min(depth, 500) + 2 > MAX_DEPTH)


def test_an_ab_tables_task_names_reach_the_terminal_as_text() -> None:
    """The A/B session's hud table (issue 52 #7): a task name read from a file is shown with
    its escapes as text."""
    from pytest_hud.evaluation.paired_verdicts import format_ab_table

    arms = [{"arm": "A", "label": "zero"}, {"arm": "B", "label": "forward" + ESCAPES}]
    rows = [
        {"nodeid": f"t.py::t[{pair}@{arm}]", "pair": f"t.py::t[{pair}]", "arm": arm,
         "task": "line" + ESCAPES + "/reach", "env": "line", "outcome": "passed",
         "success": True, "error": None, "seed": pair, "group": "t.py::t", "key": f"r{pair}"}
        for pair in range(3) for arm in "AB"
    ]  # fmt: skip
    table = "\n".join(format_ab_table(rows, arms, []))
    assert "\x1b" not in table and "\x07" not in table
    assert "line\\x1b]2;pwned\\x07" in table and "forward\\x1b]2;pwned" in table


def _depth(value: Any) -> int:
    """How deep ``value`` nests lists and dicts (0 for a scalar), walked level by level."""
    level, frontier = 0, [value]
    while containers := [item for item in frontier if isinstance(item, list | dict)]:
        level += 1
        frontier = [
            c for item in containers for c in (item.values() if isinstance(item, dict) else item)
        ]
    return level


@settings(max_examples=300, deadline=None)
@given(value=_JSON, wrap=st.integers(0, 80), ascii=st.booleans())
def test_the_depth_read_from_the_text_is_the_parsed_depth(
    value: Any, wrap: int, ascii: bool
) -> None:
    """The readers' bound is read from the text (brackets in strings and escapes skipped),
    and it is the depth the parser builds: the same answer as the parsed value's."""
    from pytest_hud.plumbing.jsonread import depth_over

    for _ in range(wrap):
        value = [value]
    text = json.dumps(value, ensure_ascii=ascii)
    deep = _depth(json.loads(text))
    for as_read in (text, text.encode()):
        assert not depth_over(as_read, deep)
        assert deep == 0 or depth_over(as_read, deep - 1)


def test_a_document_past_the_bound_never_reaches_the_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The web console reads what a page sends with this reader: ``"[" * 30000`` ran the
    parser to the interpreter's recursion limit, where a finalizer the collector ran failed
    (test_console_web's bounded-requests test, once, under load). Refused before it runs."""
    from pytest_hud.plumbing import jsonread

    parsed: list[object] = []
    monkeypatch.setattr(jsonread.json, "loads", lambda text: parsed.append(text))
    for text in ("[" * 30_000 + "]" * 30_000, b'{"a":' * 70 + b"1" + b"}" * 70):
        with pytest.raises(jsonread.TooDeep):
            jsonread.loads(text)
    assert parsed == []
    jsonread.loads('["' + "[" * 100 + '\\"["]')  # brackets in a string are text: parsed
    assert len(parsed) == 1
