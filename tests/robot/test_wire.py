"""The openpi/0 codec against vectors produced by openpi-client itself."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest

from pytest_hud.robot.wire.codec import WireError, carry, pack, pack_chunks, unpack, ws_options

VECTORS = Path(__file__).resolve().parents[1] / "helpers" / "data" / "wire_vectors"
CASES = json.loads((VECTORS / "cases.json").read_text())


def build(spec: dict[str, Any]) -> Any:
    """Rebuild a case's Python object from its JSON description (no openpi-client needed)."""
    t = spec["t"]
    if t == "ndarray":
        dtype = np.dtype(spec["dtype"])
        if "recipe" in spec:
            n = int(np.prod(spec["shape"]))
            arr = (np.arange(n) % spec["recipe"]["modulus"]).astype(dtype).reshape(spec["shape"])
        else:
            raw = base64.b64decode(spec["data_b64"])
            arr = np.frombuffer(raw, dtype=dtype).reshape(spec["shape"]).copy()
        layout = spec.get("layout", {"kind": "c"})
        if layout["kind"] == "fortran":
            arr = np.asfortranarray(arr)
        elif layout["kind"] == "view":
            base = build(layout["base"])
            arr = base[tuple(slice(*ix) for ix in layout["index"])]
        return arr
    if t == "npscalar":
        return np.dtype(spec["dtype"]).type(spec["v"])
    if t == "dict":
        return {build(k): build(v) for k, v in spec["items"]}
    if t in ("list", "tuple"):
        items = [build(x) for x in spec["items"]]
        return tuple(items) if t == "tuple" else items
    if t == "bytes":
        return base64.b64decode(spec["b64"])
    if t == "float":
        return float.fromhex(spec["hex"])
    if t == "none":
        return None
    return spec["v"]


def check_decoded(got: Any, spec: dict[str, Any]) -> None:
    """Our decoder returns what openpi-client's returned: same types, dtypes, shapes, values."""
    t = spec["t"]
    if t == "ndarray":
        assert isinstance(got, np.ndarray)
        assert got.dtype.str == spec["dtype"] and list(got.shape) == spec["shape"]
        assert got.tobytes() == build({**spec, "layout": {"kind": "c"}}).tobytes()
        assert got.flags.writeable == spec["flags"]["writeable"]
    elif t == "npscalar":
        assert isinstance(got, np.generic) and got.dtype.str == spec["dtype"]
        assert got.item() == spec["v"]
    elif t == "dict":
        assert len(got) == len(spec["items"])
        for k, v in spec["items"]:
            check_decoded(got[build(k)], v)
    elif t in ("list", "tuple"):
        assert isinstance(got, list) and len(got) == len(spec["items"])
        for g, s in zip(got, spec["items"], strict=True):
            check_decoded(g, s)
    else:
        assert got == build(spec)


def pack_joined(obj: Any) -> bytes:
    """pack_chunks' buffers concatenated: what a vectored send puts on the wire."""
    return b"".join(pack_chunks(obj))


ENCODERS = pytest.mark.parametrize("encode", [pack, pack_joined], ids=["pack", "pack_chunks"])

#: openpi-client packs and decodes these; the wire refuses them (only b/i/u/f arrays travel).
DEVIATIONS = {"str_array_u4", "datetime64_s"}
SHARED = [c for c in CASES["cases"] if c["name"] not in DEVIATIONS]
REFUSED = [c for c in CASES["cases"] if c["name"] in DEVIATIONS]


@ENCODERS
@pytest.mark.parametrize("case", SHARED, ids=lambda c: c["name"])
def test_pack_is_byte_identical_to_openpi_client(case: dict[str, Any], encode: Any) -> None:
    expected = (VECTORS / case["file"]).read_bytes()
    assert encode(build(case["input"])) == expected


def test_pack_chunks_references_large_arrays_instead_of_copying() -> None:
    image = np.arange(224 * 224 * 3, dtype=np.uint8).reshape(224, 224, 3)
    state = np.ones(8, np.float32)
    chunks = pack_chunks({"image": image, "state": state, "nested": [{"b": image[1:20]}]})
    big = [c for c in chunks if isinstance(c, memoryview)]
    assert len(big) == 2  # the image, and the contiguous row slice; the state is inline
    assert np.shares_memory(np.frombuffer(big[0], np.uint8), image)
    assert big[0].nbytes == image.nbytes and big[1].nbytes == image[1:20].nbytes
    # a non-contiguous array is copied like pack() copies it
    strided = image[:, ::2]
    assert len(pack_chunks({"x": strided})) == 1
    assert pack_joined({"x": strided}) == pack({"x": strided})


@pytest.mark.parametrize("case", SHARED, ids=lambda c: c["name"])
def test_unpack_matches_openpi_client(case: dict[str, Any]) -> None:
    check_decoded(unpack((VECTORS / case["file"]).read_bytes()), case["decoded"])


@pytest.mark.parametrize("case", SHARED, ids=lambda c: c["name"])
def test_carry_gives_what_the_wire_decodes_without_the_bytes(case: dict[str, Any]) -> None:
    """An inline sim and its agent pass messages through carry(): the receiver must see what
    unpack(pack(msg)) gives, and never the sender's buffers (a bridge reuses its rows)."""
    sent = build(case["input"])
    got = carry(sent)
    check_decoded(got, case["decoded"])
    for mine, theirs in zip(_arrays(sent), _arrays(got), strict=True):
        assert not np.shares_memory(mine, theirs)


def _arrays(obj: Any) -> list[np.ndarray]:
    if isinstance(obj, np.ndarray):
        return [obj]
    if isinstance(obj, dict):
        return [a for v in obj.values() for a in _arrays(v)]
    if isinstance(obj, list | tuple):
        return [a for v in obj for a in _arrays(v)]
    return []


@pytest.mark.parametrize(
    "value",
    [np.zeros(2, "<U2"), np.zeros(2, np.complex64), np.array([None], object), object()],
    ids=["unicode", "complex", "object-array", "object"],
)
def test_carry_refuses_what_the_wire_refuses(value: Any) -> None:
    with pytest.raises(WireError, match="over openpi/0"):
        pack({"x": value})
    with pytest.raises(WireError, match="over openpi/0"):
        carry({"x": value})


@ENCODERS
@pytest.mark.parametrize("case", REFUSED, ids=lambda c: c["name"])
def test_unicode_and_datetime_arrays_are_refused_both_ways(
    case: dict[str, Any], encode: Any
) -> None:
    """Issue 12 #12: openpi-client lets ``U`` and ``M8`` arrays through; the wire does not."""
    assert len(REFUSED) == 2
    with pytest.raises(WireError, match="only bool, integer, unsigned and float arrays travel"):
        encode(build(case["input"]))
    with pytest.raises(WireError, match="only bool, integer, unsigned and float arrays travel"):
        unpack((VECTORS / case["file"]).read_bytes())


@pytest.mark.parametrize("dtype", ["<U2", "<M8[s]", "<m8[ms]", "|S3", "|V4"])
def test_decoder_refuses_every_dtype_but_bool_int_uint_float(dtype: str) -> None:
    frame = msgpack.packb(
        {b"__ndarray__": True, b"data": b"\0" * 24, b"dtype": dtype, b"shape": [1]}
    )
    with pytest.raises(WireError, match="only bool, integer, unsigned and float arrays travel"):
        unpack(frame)
    scalar = msgpack.packb({b"__npgeneric__": True, b"data": 0, b"dtype": dtype})
    with pytest.raises(WireError, match="only bool, integer, unsigned and float arrays travel"):
        unpack(scalar)


@pytest.mark.parametrize(
    "shape",
    [[-1], [2, -1], [1.5], ["2"], 2, [True], [2**62, 2**62]],
    ids=["minus-one", "inner-minus-one", "float", "str", "not-a-list", "bool", "huge"],
)
def test_decoder_refuses_shapes_numpy_would_guess(shape: Any) -> None:
    """``[-1]`` decoded as a 2-element array on 8 bytes before; no shape is inferred now."""
    frame = msgpack.packb(
        {b"__ndarray__": True, b"data": b"\0" * 8, b"dtype": "<f4", b"shape": shape}
    )
    with pytest.raises(WireError, match="shape"):
        unpack(frame)


def test_decoder_refuses_data_longer_than_the_shape() -> None:
    frame = msgpack.packb(
        {b"__ndarray__": True, b"data": b"\0" * 8, b"dtype": "<f4", b"shape": [1]}
    )
    with pytest.raises(WireError, match="needs 4 bytes, the frame carries 8"):
        unpack(frame)


@pytest.mark.parametrize(
    "value",
    [
        np.zeros(2, np.complex64),
        np.complex128(1 + 2j),
        np.array([None, 1], dtype=object),
        np.zeros(2, dtype="V4"),
        np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]),
    ],
    ids=["complex-array", "complex-scalar", "object", "void", "structured"],
)
@ENCODERS
def test_refuses_object_void_complex(value: Any, encode: Any) -> None:
    with pytest.raises(WireError, match="over openpi/0"):
        encode({"x": value})
    with pytest.raises(WireError, match="over openpi/0"):  # also when big enough to be a chunk
        encode({"x": np.resize(value, 4096) if isinstance(value, np.ndarray) else value})


def test_openpi_client_refuses_the_same_dtypes() -> None:
    refused = {u["name"] for u in CASES["unsupported"] if u.get("raises")}
    assert {"complex128 array", "object array", "void array"} <= refused


def test_never_pickles_arbitrary_objects() -> None:
    class Thing:
        pass

    with pytest.raises(WireError, match="no pickling"):
        pack({"x": Thing()})


def test_decoder_refuses_object_dtype_smuggled_in() -> None:
    frame = msgpack.packb(
        {"x": {b"__ndarray__": True, b"data": b"\0" * 8, b"dtype": "|O", b"shape": [1]}}
    )
    with pytest.raises(WireError, match="object"):
        unpack(frame)


@pytest.mark.parametrize(
    "frame",
    [b"", b"\xc1", b"\x92\x01", b"\xdd\xff\xff\xff\xff", "text"],
    ids=["empty", "reserved-byte", "truncated", "huge-array-header", "text"],
)
def test_garbage_frames_raise_wire_error(frame: Any) -> None:
    with pytest.raises(WireError):
        unpack(frame)


def test_ndarray_with_inconsistent_shape_is_a_wire_error() -> None:
    frame = msgpack.packb(
        {b"__ndarray__": True, b"data": b"\0" * 4, b"dtype": "<f4", b"shape": [3]}
    )
    with pytest.raises(WireError):
        unpack(frame)


def test_round_trip_preserves_dtype_shape_and_values() -> None:
    rng = np.random.default_rng(0)
    obs = {
        "observation/image": rng.integers(0, 255, (96, 96, 3), dtype=np.uint8),
        "observation/state": rng.standard_normal(8).astype(np.float32),
        "terminated": False,
    }
    back = unpack(pack(obs))
    assert back["terminated"] is False
    for key in ("observation/image", "observation/state"):
        assert back[key].dtype == obs[key].dtype
        np.testing.assert_array_equal(back[key], obs[key])


def test_compression_is_off() -> None:
    assert ws_options()["compression"] is None
