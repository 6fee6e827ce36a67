"""Every test, benchmark and example dials loopback only.

The workplace rule (and issue 10): all traffic stays on this machine's loopback. A test
that probes the Docker bridge gateway, a container's own IP or a LAN address is a bug
even when it "only checks that nothing answers": it sends packets off loopback, and it
reads optional engine fields (``IPAM.Config[0].Gateway`` is absent on a fresh engine).

This test reads the source of ``tests/``, ``bench/``, ``examples/``, ``.ci/`` and
``scripts/`` and fails on:

- an IPv4 literal outside 127.0.0.0/8, except ``0.0.0.0`` as a *bind* address (servers
  inside containers listen on it; our clients rewrite it to the published loopback port,
  see ``runtime/control.py``), checked line by line against the bind forms below;
- an IPv6 literal other than ``::1`` / ``::``;
- the names that only serve to find a non-loopback address: the bridge gateway, a
  container's ``IPAddress``, ``docker0``, ``--network host``, ``ray://`` to a non-loopback
  host.

The fake Modal (``tests/helpers/fake_modal.py``) gives each sandbox an address of its own in
127.0.0.0/8 (``127.77.N.1``) so that every sandbox can bind the literal ports a container
would; that range is loopback (the kernel routes it to ``lo``), so it is allowed.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ["tests", "bench", "examples", ".ci", "scripts"]
SUFFIXES = {".py", ".sh", ".toml", ".json", ".jsonl", ".md", ".cfg", ".yaml", ".yml", ""}
THIS = Path(__file__).resolve()

IPV4 = re.compile(r"(?<![\w.])(\d{1,3}(?:\.\d{1,3}){3})(?![\w.]*\d)")
# an IPv6 literal as code names one: quoted or in brackets (not a slice such as a[::2])
IPV6 = re.compile(r"""(?<=["'\[])((?:[0-9a-fA-F]{0,4}:){2,7}[0-9a-fA-F]{0,4})(?=["'\]])""")
# 0.0.0.0 is fine where it is an address to *listen* on, never where it is dialled
BIND_FORMS = re.compile(
    r"""(--host|--sim-host|host=|bind|listen|serve|"0\.0\.0\.0"\s*(in|==|,\s*"127)|"""
    r"""ws://0\.0\.0\.0|tcp://0\.0\.0\.0|means that address|0\.0\.0\.0. in its command|"""
    r"""==\s*"0\.0\.0\.0"\s*else)""",
    re.IGNORECASE,
)
FORBIDDEN = [
    # Docker's bridge gateway (the IPAM field, or prose naming it); execnet's
    # lowercase ``gateway`` objects (xdist's workers) are no address
    re.compile(r"[\"']Gateway[\"']|bridge gateway|docker gateway", re.IGNORECASE),
    re.compile(r"docker0"),
    re.compile(r"[\"']IPAddress[\"']"),
    re.compile(r"--network[= ]host|network_mode\s*=\s*[\"']host"),
]


def sources() -> list[Path]:
    found = []
    for folder in FOLDERS:
        base = ROOT / folder
        if not base.exists():
            continue
        for path in sorted(base.rglob("*")):
            if not path.is_file() or path.resolve() == THIS:
                continue
            if any(part in {"venvs", "__pycache__", "data"} for part in path.parts):
                continue
            if path.suffix in SUFFIXES:
                found.append(path)
    return found


def offences(text: str, name: str) -> list[str]:
    bad: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{name}:{number}: {line.strip()}"
        for literal in IPV4.findall(line):
            try:
                addr = ipaddress.IPv4Address(literal)
            except ValueError:
                continue  # a version number such as 1.2.3.4 that is not an address
            if addr.is_loopback:
                continue
            if addr == ipaddress.IPv4Address("0.0.0.0") and BIND_FORMS.search(line):
                continue
            bad.append(f"{where}  <- {literal} is not loopback")
        for literal in IPV6.findall(line):
            try:
                addr6 = ipaddress.IPv6Address(literal)
            except ValueError:
                continue
            if addr6.is_loopback or addr6.is_unspecified:
                continue
            bad.append(f"{where}  <- {literal} is not loopback")
        for pattern in FORBIDDEN:
            if pattern.search(line):
                bad.append(f"{where}  <- {pattern.pattern} finds a non-loopback address")
    return bad


def test_no_test_bench_or_example_names_a_non_loopback_destination() -> None:
    files = sources()
    assert len(files) > 20, f"the audit found only {len(files)} files under {FOLDERS}"
    bad = []
    for path in files:
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        bad += offences(text, str(path.relative_to(ROOT)))
    assert not bad, "non-loopback destinations (fix: dial 127.0.0.1 only):\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "line, flagged",
    [
        ('gw = net.attrs["IPAM"]["Config"][0]["Gateway"]', True),
        ('socket.create_connection(("172.17.0.1", port))', True),
        ('ip = c.attrs["NetworkSettings"]["IPAddress"]', True),
        ('url = "ws://10.0.0.5:8000"', True),
        ('connect("192.168.1.20", 80)', True),
        ('socket.create_connection(("0.0.0.0", port))', True),
        ('host = "fe80::1"', True),
        ("docker run --network host img", True),
        ('socket.create_connection(("127.0.0.1", port))', False),
        ('host = "127.77.3.1"', False),
        ('argv += ["--host", "0.0.0.0", "--port", "8000"]', False),
        ('assert rewrite_url("ws://0.0.0.0:8001", host, m) == "ws://127.0.0.1:1"', False),
        ('ver = "torch==2.14.1"', False),
        ('url = "ws://[::1]:8000"', False),
        ("strided = image[:, ::2]", False),
        ('assert seen["worker"] == "gw0", "WorkerController.gateway.id moved"', False),
        ("# probe the bridge gateway of the engine", True),
        ('argv = [ip if a == "0.0.0.0" else a for a in argv]', False),
    ],
)
def test_the_audit_flags_what_it_should(line: str, flagged: bool) -> None:
    assert bool(offences(line, "probe.py")) is flagged, offences(line, "probe.py")
