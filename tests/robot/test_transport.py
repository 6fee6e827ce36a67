"""The client WebSocket seam: our RFC 6455 client and the websockets adapter behave
alike against a real websockets server, and against servers that break the protocol;
the bridge's vectored sends put the same bytes on the wire as websockets would."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable

import numpy as np
import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.asyncio.server import ServerConnection, serve

from pytest_hud.robot.wire.codec import pack, pack_chunks, unpack, ws_options
from pytest_hud.robot.wire.transport import (
    IMPLEMENTATIONS,
    ConnectError,
    ConnectTimeout,
    TransportClosed,
    connect,
)
from pytest_hud.robot.wire.vectored import frame_header, send_chunks
from pytest_hud.robot.wire.wsclient import STAGE_BYTES, mask

pytestmark = pytest.mark.anyio
IMPLS = pytest.mark.parametrize("impl", IMPLEMENTATIONS)

Handler = Callable[[ServerConnection], Awaitable[None]]


async def serving(handler: Handler) -> AsyncIterator[str]:
    async with serve(handler, "127.0.0.1", 0, ping_interval=None, **ws_options()) as server:
        yield f"ws://127.0.0.1:{next(iter(server.sockets)).getsockname()[1]}"


async def echo(ws: ServerConnection) -> None:
    async for message in ws:
        await ws.send(message)


@pytest.fixture
async def echo_url() -> AsyncIterator[str]:
    async for url in serving(echo):
        yield url


# -- against a websockets server ------------------------------------------------------
@IMPLS
@pytest.mark.parametrize(
    "size", [0, 1, 125, 126, 65535, 65536, STAGE_BYTES - 10, STAGE_BYTES + 1, 3_000_000]
)
async def test_binary_round_trip_every_length_class(echo_url: str, impl: str, size: int) -> None:
    payload = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    t = await connect(echo_url, impl=impl)
    try:
        for _ in range(3):  # repeated: the staging buffer is reused between messages
            await t.send(payload)
            got = await t.recv()
            assert isinstance(got, bytes | memoryview) and bytes(got) == payload
    finally:
        await t.close()


@IMPLS
async def test_text_and_interleaved_sizes_keep_their_order(echo_url: str, impl: str) -> None:
    t = await connect(echo_url, impl=impl)
    sizes = [10, 200_000, 3, 70_000, 0, 130_000]
    for n in sizes:  # all in flight at once: small and big frames share the stream
        await t.send(bytes([n % 251]) * n)
    await t.send("héllo")
    for n in sizes:
        assert bytes(await t.recv()) == bytes([n % 251]) * n
    assert await t.recv() == "héllo"
    await t.close()


@IMPLS
async def test_a_burst_of_messages_is_delivered_in_order(impl: str) -> None:
    async def burst(ws: ServerConnection) -> None:
        for i in range(200):  # more than the client queues before it pauses reading
            await ws.send(pack({"i": i, "pad": np.zeros(1000, np.uint8)}))
        await ws.wait_closed()

    async for url in serving(burst):
        t = await connect(url, impl=impl)
        await asyncio.sleep(0.2)
        assert [unpack(await t.recv())["i"] for _ in range(200)] == list(range(200))
        await t.close()


@IMPLS
async def test_fragmented_message_is_reassembled(impl: str) -> None:
    async def fragments(ws: ServerConnection) -> None:
        await ws.send([b"ab", b"c" * 100_000, b"d"])
        await ws.send(["he", "llo"])
        await ws.wait_closed()

    async for url in serving(fragments):
        t = await connect(url, impl=impl)
        assert bytes(await t.recv()) == b"ab" + b"c" * 100_000 + b"d"
        assert await t.recv() == "hello"
        await t.close()


@IMPLS
async def test_server_ping_is_answered(impl: str) -> None:
    ponged = asyncio.Event()

    async def pinger(ws: ServerConnection) -> None:
        waiter = await ws.ping(b"are you there")
        async with asyncio.timeout(5):
            await waiter
        ponged.set()
        await ws.send(b"after ping")
        await ws.wait_closed()

    async for url in serving(pinger):
        t = await connect(url, impl=impl)
        assert bytes(await t.recv()) == b"after ping"
        assert ponged.is_set()
        await t.close()


@IMPLS
async def test_server_close_code_and_reason_reach_the_client(impl: str) -> None:
    async def closer(ws: ServerConnection) -> None:
        await ws.send(b"last words")
        await ws.close(4001, "episode over")

    async for url in serving(closer):
        t = await connect(url, impl=impl)
        assert bytes(await t.recv()) == b"last words"  # delivered before the close
        with pytest.raises(TransportClosed) as err:
            await t.recv()
        assert err.value.code == 4001 and err.value.reason == "episode over"
        with pytest.raises(TransportClosed):
            await t.send(b"too late")
        await t.close()


@IMPLS
async def test_client_close_is_a_clean_1000(impl: str) -> None:
    codes: list[int | None] = []

    async def watch(ws: ServerConnection) -> None:
        await ws.wait_closed()
        codes.append(ws.close_code)

    async for url in serving(watch):
        t = await connect(url, impl=impl)
        await t.close()
        async with asyncio.timeout(5):
            while not codes:
                await asyncio.sleep(0.01)
    assert codes == [1000]


@IMPLS
async def test_headers_reach_the_server(impl: str) -> None:
    seen: list[str | None] = []

    async def record(ws: ServerConnection) -> None:
        assert ws.request is not None
        seen.append(ws.request.headers.get("Authorization"))
        seen.append(ws.request.headers.get("Sec-WebSocket-Extensions"))

    async for url in serving(record):
        t = await connect(url, impl=impl, headers={"Authorization": "Api-Key k"})
        await t.close()
    assert seen == ["Api-Key k", None]  # and no extension (compression) is offered


# -- servers that fail or break the protocol -----------------------------------------
async def raw_server(respond: Callable[[bytes], bytes | None]) -> tuple[asyncio.Server, str]:
    """A TCP server that reads the request and writes ``respond(request)`` (None: stay mute)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        reply = respond(request)
        if reply is not None:
            writer.write(reply)
        await reader.read()  # until the client goes away
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"


def upgrade(request: bytes, *, accept: str | None = None) -> bytes:
    key = next(
        line.split(b":", 1)[1].strip()
        for line in request.split(b"\r\n")
        if line.lower().startswith(b"sec-websocket-key")
    )
    good = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    return (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + (accept.encode() if accept else good) + b"\r\n\r\n"
    )


@IMPLS
async def test_nothing_listening_is_a_connect_error(impl: str) -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    with pytest.raises(ConnectError):
        await connect(f"ws://127.0.0.1:{port}", impl=impl, open_timeout=5)


@IMPLS
async def test_plain_http_server_is_a_connect_error_naming_its_status(impl: str) -> None:
    server, url = await raw_server(
        lambda _: b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
    )
    async with server:
        with pytest.raises(ConnectError, match="200"):
            await connect(url, impl=impl, open_timeout=5)


@IMPLS
async def test_mute_server_is_a_bounded_connect_timeout(impl: str) -> None:
    server, url = await raw_server(lambda _: None)
    async with server:
        with pytest.raises(ConnectTimeout, match="timed out"):
            await connect(url, impl=impl, open_timeout=0.5)


@IMPLS
async def test_wrong_accept_key_is_refused(impl: str) -> None:
    server, url = await raw_server(lambda req: upgrade(req, accept="bm90IHRoZSBrZXk="))
    async with server:
        with pytest.raises(ConnectError, match="(?i)accept"):
            await connect(url, impl=impl, open_timeout=5)


async def test_masked_server_frame_is_a_protocol_error() -> None:
    # a server must not mask its frames (RFC 6455 5.1): the client fails the connection
    key = b"\x01\x02\x03\x04"
    server, url = await raw_server(lambda req: upgrade(req) + b"\x82\x83" + key + mask(b"abc", key))
    async with server:
        t = await connect(url, impl="frames", open_timeout=5)
        with pytest.raises(TransportClosed) as err:
            await t.recv()
        assert err.value.code == 1002 and "masked" in err.value.reason
        await t.close()


async def test_reserved_bits_without_an_extension_are_a_protocol_error() -> None:
    server, url = await raw_server(lambda req: upgrade(req) + b"\xc2\x03abc")  # RSV1 set
    async with server:
        t = await connect(url, impl="frames", open_timeout=5)
        with pytest.raises(TransportClosed, match="reserved"):
            await t.recv()
        await t.close()


async def test_connection_dropped_mid_frame_ends_the_wait() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        writer.write(upgrade(request) + frame_header(200_000) + b"x" * 1000)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(cut, "127.0.0.1", 0)
    async with server:
        url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        t = await connect(url, impl="frames", open_timeout=5)
        async with asyncio.timeout(5):  # never hangs on the missing 199,000 bytes
            with pytest.raises(TransportClosed, match="connection lost"):
                await t.recv()
        await t.close()


async def test_unknown_implementation_names_the_choices() -> None:
    with pytest.raises(ValueError, match="frames, websockets"):
        await connect("ws://127.0.0.1:1", impl="curl")


@pytest.mark.parametrize("url", ["http://127.0.0.1:80", "ws://", "ws://host:notaport"])
async def test_bad_urls_are_connect_errors(url: str) -> None:
    with pytest.raises(ConnectError):
        await connect(url, impl="frames", open_timeout=2)


def test_mask_is_an_involution_and_matches_the_rfc_example() -> None:
    key = b"\x37\xfa\x21\x3d"  # RFC 6455 5.7: "Hello" masked with this key
    assert mask(b"Hello", key) == bytes.fromhex("7f9f4d5158")
    data = np.random.default_rng(0).integers(0, 256, 5003, dtype=np.uint8).tobytes()
    assert mask(mask(data, key), key) == data  # the numpy path, with a ragged tail
    assert mask(data, key)[:1000] == mask(data[:1000], key)  # both paths agree


# -- the bridge side: vectored sends -------------------------------------------------------
async def test_vectored_send_puts_the_same_message_on_the_wire() -> None:
    image = np.random.default_rng(1).integers(0, 256, (224, 224, 3), dtype=np.uint8)
    huge = np.random.default_rng(2).integers(0, 256, 16_000_000, dtype=np.uint8)
    messages = [{"img": image, "t": False}, {"small": np.ones(3)}, {"huge": huge}] * 2
    direct: list[bool] = []

    async def sender(ws: ServerConnection) -> None:
        for msg in messages:
            direct.append(await send_chunks(ws, pack_chunks(msg)))
        await ws.send(b"plain")  # websockets' own send still works after vectored ones
        await ws.wait_closed()

    async for url in serving(sender):
        # a websockets client reading slowly: the 16 MB message overflows the socket
        async with ws_connect(url, max_size=None, compression=None) as ws:
            await asyncio.sleep(0.3)
            for msg in messages:
                assert await ws.recv() == pack(msg)
            assert await ws.recv() == b"plain"
    assert direct[:2] == [True, True]  # zero-copy when the socket takes the whole frame
    assert False in direct  # the 16 MB frame did not fit: its rest went through the transport


async def test_vectored_send_on_a_closed_connection_raises_connection_closed() -> None:
    import websockets

    raised: list[BaseException] = []

    async def sender(ws: ServerConnection) -> None:
        await ws.wait_closed()
        try:
            await send_chunks(ws, pack_chunks({"x": np.zeros(10_000, np.uint8)}))
        except BaseException as exc:
            raised.append(exc)

    async for url in serving(sender):
        async with ws_connect(url) as ws:
            await ws.close()
        async with asyncio.timeout(5):
            while not raised:
                await asyncio.sleep(0.01)
    assert isinstance(raised[0], websockets.ConnectionClosed)


def test_frame_header_length_classes() -> None:
    assert frame_header(5) == b"\x82\x05"
    assert frame_header(126) == b"\x82\x7e\x00\x7e"
    assert frame_header(70_000) == b"\x82\x7f" + (70_000).to_bytes(8, "big")


# -- the frame parser against a reference encoder, with arbitrary read boundaries ----------
def reference_stream(seed: int) -> tuple[bytes, list[bytes | str], int]:
    """Server frames serialized by websockets' own encoder: random messages of every
    length class, some fragmented, with pings between frames. Returns the bytes, the
    messages a client must deliver, and how many pings it must answer."""
    from websockets.frames import Frame, Opcode

    rng = np.random.default_rng(seed)
    out, messages, pings = bytearray(), [], 0
    for _ in range(40):
        size = int(rng.choice([0, 5, 125, 126, 300, 65_535, 65_536, STAGE_BYTES, 200_000]))
        text = bool(rng.random() < 0.2)
        body = rng.integers(97, 123, size, dtype=np.uint8).tobytes()
        messages.append(body.decode() if text else body)
        cuts = sorted(rng.choice(size + 1, int(rng.integers(0, 3)), replace=True).tolist())
        pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, size], strict=True)]
        for i, piece in enumerate(pieces):
            op = (Opcode.TEXT if text else Opcode.BINARY) if i == 0 else Opcode.CONT
            out += Frame(op, piece, fin=i == len(pieces) - 1).serialize(mask=False, extensions=[])
            if rng.random() < 0.3:  # control frames may come between fragments
                out += Frame(Opcode.PING, b"p%d" % pings).serialize(mask=False, extensions=[])
                pings += 1
    return bytes(out), messages, pings


@pytest.mark.parametrize("seed", range(6))
async def test_parser_matches_the_reference_encoder_at_any_read_boundary(seed: int) -> None:
    stream, messages, pings = reference_stream(seed)
    pongs: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(upgrade(await reader.readuntil(b"\r\n\r\n")))
        rng = np.random.default_rng(seed + 100)
        pos = 0
        while pos < len(stream):  # arbitrary write sizes: headers split across reads
            n = int(rng.choice([1, 2, 3, 7, 100, 4096, 70_000]))
            writer.write(stream[pos : pos + n])
            pos += n
            if rng.random() < 0.2:
                await writer.drain()
                await asyncio.sleep(0)
        await writer.drain()
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while len(pongs) < pings:  # the client's pongs: masked frames
                head = await reader.readexactly(2)
                size = head[1] & 0x7F
                key = await reader.readexactly(4)
                pongs.append(mask(await reader.readexactly(size), key))
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        t = await connect(url, impl="frames", open_timeout=5)
        async with asyncio.timeout(30):
            got = [await t.recv() for _ in messages]
            while len(pongs) < pings:
                await asyncio.sleep(0.01)
        t.abort()
    assert [m if isinstance(m, str) else bytes(m) for m in got] == messages
    assert pongs == [b"p%d" % i for i in range(pings)]


@pytest.mark.parametrize("seed", range(20))
async def test_random_bytes_after_the_handshake_end_in_a_clean_close(seed: int) -> None:
    junk = np.random.default_rng(seed).integers(0, 256, 3000, dtype=np.uint8).tobytes()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(upgrade(await reader.readuntil(b"\r\n\r\n")) + junk)
        await writer.drain()
        writer.close()  # then the stream ends, maybe inside a frame the junk announced

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        t = await connect(url, impl="frames", open_timeout=5)
        async with asyncio.timeout(5):  # garbage never hangs the client
            with pytest.raises(TransportClosed):
                while True:  # junk may parse as frames, but it ends in TransportClosed
                    msg = await t.recv()
                    assert isinstance(msg, bytes | memoryview | str)
        await t.close()


def test_masking_keys_differ_frame_to_frame_and_a_forked_child_draws_its_own() -> None:
    """Keys come from a pool of os.urandom: each frame its own, and a child process after
    fork() never repeats its parent's next keys (the pool is dropped in the child)."""
    from pytest_hud.robot.wire.frames import _client_frame

    def key(frame: bytes) -> bytes:
        return frame[2:6]  # a small frame: 2 header bytes, then the key

    keys = [key(_client_frame(0x2, b"x")) for _ in range(3000)]  # across a pool refill
    assert len(set(keys)) > 2990  # 32-bit keys: a repeat among 3,000 is rare, not many
    read, write = os.pipe()
    with warnings.catch_warnings():  # 3.12 warns on fork() beside threads; the child only writes
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: its next key, then out at once
        os.write(write, key(_client_frame(0x2, b"x")))
        os._exit(0)
    os.close(write)
    child = os.read(read, 4)
    os.close(read)
    os.waitpid(pid, 0)
    assert len(child) == 4 and child != key(_client_frame(0x2, b"x"))
