"""Property-based fuzzing (hypothesis) of what strangers' bytes reach first (issue 39): the
openpi/0 codec and the control channel's request parser and line reader. No input raises
anything but the documented error (WireError; ValueError for a request line), and the work
done on a frame stays proportional to its size: the one product taken over a shape never
sees more than numpy's 64 dims, and no dtype a frame names is ever parsed by numpy
(issue 52), whatever the frame claims."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math

import msgpack
import numpy as np
import pytest
from dtype_spy import spy_on_dtype
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_hud.plumbing.rpc import Limits, _LineReader, _parse_request, _Refused
from pytest_hud.robot.wire import codec
from pytest_hud.robot.wire.codec import MAX_DIMS, WireError, pack, unpack

FUZZ = settings(
    max_examples=400,
    deadline=None,
    # ``products`` is cleared for each example
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

#: msgpack values of the shapes a frame is built of, nested a few levels
_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),  # msgpack's integers
    st.floats(allow_nan=True),
    st.binary(max_size=64),
    st.text(max_size=16),
)
_values = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.dictionaries(st.one_of(st.text(max_size=8), st.binary(max_size=8)), inner, max_size=6),
    ),
    max_leaves=30,
)
_dtypes = st.one_of(
    st.sampled_from(["<f4", "<f8", "|u1", "<i8", "|b1", "|O", "<c8", "<M8[s]", "V8", "<U4"]),
    st.text(max_size=12),
    st.binary(max_size=12),
    st.integers(-(2**63), 2**63 - 1),
)
_shapes = st.one_of(
    st.lists(st.integers(-3, 2**62), max_size=80),
    st.lists(st.sampled_from([0, 1, 2, 3, 10**18]), min_size=60, max_size=5000),
    _values,
)


@st.composite
def ndarray_frames(draw: st.DrawFn) -> bytes:
    """A frame holding an ``__ndarray__`` map with any dtype, shape and data."""
    array = {
        b"__ndarray__": draw(st.one_of(st.just(True), _leaf)),
        b"data": draw(st.one_of(st.binary(max_size=256), _leaf)),
        b"dtype": draw(_dtypes),
        b"shape": draw(_shapes),
    }
    frame = {b"obs": array} if draw(st.booleans()) else array
    return msgpack.packb(frame, use_bin_type=True)


def _decode(frame: bytes, products: list[int]) -> None:
    with contextlib.suppress(WireError):
        unpack(frame)
    assert all(n <= MAX_DIMS for n in products), max(products)


@pytest.fixture
def products(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every shape the codec takes a product over."""
    seen: list[int] = []
    real = math.prod

    def counted(values, *args, **kwargs):  # type: ignore[no-untyped-def]
        values = list(values)
        seen.append(len(values))
        return real(values, *args, **kwargs)

    monkeypatch.setattr(codec.math, "prod", counted)
    return seen


@FUZZ
@given(st.binary(max_size=2048))
def test_any_bytes_decode_or_raise_wire_error(frame: bytes) -> None:
    with contextlib.suppress(WireError):
        unpack(frame)


@FUZZ
@given(frame=ndarray_frames())
def test_any_ndarray_map_decodes_or_raises_wire_error_without_a_product_over_many_dims(
    frame: bytes, products: list[int]
) -> None:
    products.clear()
    _decode(frame, products)


def test_twenty_thousand_huge_dims_are_refused_before_any_product(products: list[int]) -> None:
    """Issue 39 #4: this 175 KB frame cost 2.5 s of ``math.prod`` per frame."""
    frame = msgpack.packb(
        {b"__ndarray__": True, b"data": b"", b"dtype": "<f4", b"shape": [2**62] * 20_000},
        use_bin_type=True,
    )
    with pytest.raises(WireError, match="20000 dims"):
        unpack(frame)
    assert products == []


def test_a_real_frame_still_round_trips() -> None:
    obs = {"state": np.arange(6, dtype=np.float32).reshape(2, 3), "terminated": False}
    back = unpack(pack(obs))
    np.testing.assert_array_equal(back["state"], obs["state"])


# -- the control channel's request lines ---------------------------------------------------
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=16)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=6), st.dictionaries(st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=30,
)


@FUZZ
@given(st.one_of(st.binary(max_size=512), _json.map(lambda v: json.dumps(v).encode())))
def test_any_request_line_parses_to_an_object_or_raises_value_error(line: bytes) -> None:
    with contextlib.suppress(ValueError):
        assert isinstance(_parse_request(line), dict)


@FUZZ
@given(chunks=st.lists(st.binary(min_size=0, max_size=3000), max_size=12))
def test_the_line_reader_holds_at_most_its_cap_whatever_arrives(chunks: list[bytes]) -> None:
    """Lines come out whole; past ``max_line`` bytes without a newline the peer is refused;
    the bytes held for the server never exceed the line cap plus one read."""
    limits = Limits(max_line=1024, max_buffered=1 << 20)

    async def scenario() -> None:
        reader = asyncio.StreamReader()
        for chunk in chunks:
            reader.feed_data(chunk)
        reader.feed_eof()
        held = [0]
        lines = _LineReader(reader, limits, held)
        try:
            while True:
                line = await lines.readline()
                assert held[0] <= limits.max_line + (64 << 10)
                if not line:
                    break
                assert line.endswith(b"\n") and len(line) <= limits.max_line + 1 + (64 << 10)
        except _Refused:
            pass
        finally:
            lines.release()
        assert held[0] == 0

    asyncio.run(scenario())


# -- dtypes: looked up, never parsed (issue 52 #4) ---------------------------------------------
@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every value the codec hands to ``np.dtype`` (numpy's dtype parser) from here on."""
    return spy_on_dtype(monkeypatch)


def test_a_structured_dtype_is_refused_before_numpy_parses_it(parsed: list[object]) -> None:
    """Issue 52 #4: a frame's ``dtype`` went to ``np.dtype()`` before it was refused, and a
    structured one of 768 KiB (``"f4,f4,..."``) froze the decoding loop for about 1.9 s a
    MiB. Now it is looked up among the plain dtypes and refused unparsed, as an array and
    as a scalar; every plain dtype still decodes, by numpy's ``.str`` or its name."""
    bomb = "f4," * (1 << 18)
    frame = {b"__ndarray__": True, b"data": b"", b"dtype": bomb, b"shape": [0]}
    with pytest.raises(WireError, match=r"unknown dtype 'f4,f4,.*'\.\.\. over openpi/0"):
        unpack(msgpack.packb(frame))
    with pytest.raises(WireError, match="only bool, integer, unsigned and float arrays"):
        unpack(msgpack.packb({b"__npgeneric__": True, b"data": 0, b"dtype": bomb}))
    assert parsed == [], "a peer's dtype string reached numpy's parser"
    for name, dtype in codec.WIRE_DTYPES.items():
        data = np.arange(3).astype(dtype).tobytes()
        frame = {b"__ndarray__": True, b"data": data, b"dtype": name, b"shape": [3]}
        back = unpack(msgpack.packb(frame))
        assert back.dtype == dtype and back.tolist() == np.arange(3).astype(dtype).tolist()


@FUZZ
@given(
    dtype=st.one_of(
        _dtypes,
        st.lists(st.sampled_from(["f4", "i8", "u1", "(2,3)f8", "a", "O"]), max_size=40).map(
            ",".join
        ),
        st.sampled_from(["<f4", ">f8", "|u1", "|b1", "<i8", "float32", "uint8", "bool"]),
    )
)
def test_no_dtype_a_peer_names_reaches_numpys_parser(dtype: object, parsed: list[object]) -> None:
    parsed.clear()
    frame = {b"__ndarray__": True, b"data": b"", b"dtype": dtype, b"shape": [0]}
    with contextlib.suppress(WireError):
        unpack(msgpack.packb(frame, use_bin_type=True))
    assert parsed == []
