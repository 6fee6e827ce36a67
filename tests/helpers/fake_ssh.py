"""A stand-in for ``ssh -N -L ...`` to a fake Daytona sandbox (tests/helpers/fake_daytona.py).

Accepts the options DaytonaRuntime passes (``-F CONFIG``, ``-p``, ``-o``, ``-N``, ``-L
BIND:LPORT:HOST:PORT``) and ``SANDBOX_IP`` or ``TOKEN@SANDBOX_IP``; the login (the access
token) is the config's ``User`` or the one before ``@``, and without one it is refused
(code 255) as Daytona's SSH proxy would. For each ``-L`` it listens on BIND:LPORT
(DaytonaRuntime asks for 127.0.0.1) and forwards every connection to the sandbox's own
address (``127.0.0.1`` inside the sandbox is ``SANDBOX_IP`` here), like Daytona's SSH proxy
would. A forward it cannot bind ends it with code 255 (as ``ExitOnForwardFailure=yes``).
Runs until SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from pathlib import Path


async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy ``src`` into ``dst`` until EOF, then close ``dst`` (also used by fake_modal)."""
    with contextlib.suppress(Exception):
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    with contextlib.suppress(Exception):
        dst.close()


async def _link(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ip: str, port: int):
    try:
        up_reader, up_writer = await asyncio.open_connection(ip, port)
    except OSError:  # nothing listens yet: accept, then hang up (like sshd's channel refusal)
        writer.close()
        return
    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


async def main(argv: list[str]) -> int:
    forwards: list[tuple[str, int, int]] = []
    args = iter(argv)
    dest, user = "", ""
    for arg in args:
        if arg == "-F":  # the login: the first User line, as ssh reads it
            lines = Path(next(args)).read_text().splitlines()
            users = [line.split()[1] for line in lines if line.strip().startswith("User ")]
            user = user or (users[0] if users else "")
        elif arg in ("-p", "-o"):
            next(args)
        elif arg == "-L":
            bind, lport, _host, port = next(args).split(":")
            forwards.append((bind, int(lport), int(port)))
        elif arg.startswith("-"):
            continue
        else:
            dest = arg
    given, _, ip = dest.rpartition("@")
    if not (given or user):
        print(f"{dest}: Permission denied (no login: the access token)", file=sys.stderr)
        return 255
    servers = []
    for bind, lport, port in forwards:
        try:
            servers.append(
                await asyncio.start_server(
                    lambda r, w, port=port: _link(r, w, ip, port), bind, lport
                )
            )
        except OSError as exc:
            print(f"bind [{bind}]:{lport}: {exc}", file=sys.stderr, flush=True)
            return 255
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for server in servers:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
