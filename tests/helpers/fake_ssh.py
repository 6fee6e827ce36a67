"""A stand-in for ``ssh -N -L ...`` to a fake Daytona sandbox (tests/helpers/fake_daytona.py).

Accepts the options DaytonaRuntime passes (``-p``, ``-o``, ``-N``, ``-L
BIND:LPORT:HOST:PORT``) and ``TOKEN@SANDBOX_IP``; for each ``-L`` it listens on
BIND:LPORT (DaytonaRuntime asks for 127.0.0.1) and forwards every connection to the
sandbox's own address (``127.0.0.1`` inside the sandbox is ``SANDBOX_IP`` here), like
Daytona's SSH proxy would. A forward it cannot bind ends it with code 255 (as
``ExitOnForwardFailure=yes``). Runs until SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys


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
    dest = ""
    for arg in args:
        if arg in ("-p", "-o"):
            next(args)
        elif arg == "-L":
            bind, lport, _host, port = next(args).split(":")
            forwards.append((bind, int(lport), int(port)))
        elif arg.startswith("-"):
            continue
        else:
            dest = arg
    ip = dest.rpartition("@")[2]
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
