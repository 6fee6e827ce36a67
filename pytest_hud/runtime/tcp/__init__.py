"""Env servers already running, reached by url: ``tcp://HOST:PORT`` (the control channel's own
transport) and ``ws://HOST:PORT`` (the same client over a WebSocket). Borrowed: nothing to boot
or tear down (the client is the runtime core's :mod:`pytest_hud.runtime.control`)."""
