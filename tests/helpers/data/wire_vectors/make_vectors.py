"""Generate msgpack-numpy wire test vectors from the reference implementation.

THIS SCRIPT ONLY RUNS UNDER THE THROWAWAY openpi-client VENV, never under the
project's own environment (openpi-client pins numpy<2 and is not a dependency
of pytest-hud).  Set the venv up and run it like this:

    python3 -m venv /work/venvs/openpi
    /work/venvs/openpi/bin/pip install openpi-client==0.1.2
    /work/venvs/openpi/bin/python tests/helpers/data/wire_vectors/make_vectors.py

It refuses to run when ``openpi_client`` is not importable or numpy is >= 2.

For every case it packs a payload with ``openpi_client.msgpack_numpy.packb``
and writes:

* ``<name>.msgpack`` - the exact packed bytes;
* an entry in ``cases.json`` describing the input object (so a test can
  rebuild it without openpi-client), the sha256/size of the bytes, and the
  object that ``openpi_client.msgpack_numpy.unpackb`` returns for those bytes.

``cases.json`` also has an ``unsupported`` list recording what openpi-client
does for object / void / structured / complex dtypes and other edge inputs.

Value encoding used in cases.json (every node is a dict with key "t"):

* ``{"t": "none"}``, ``{"t": "bool", "v": b}``, ``{"t": "int", "v": i}``
* ``{"t": "float", "v": x, "hex": float.hex(x)}`` (non-finite v is a string)
* ``{"t": "str", "v": s}``, ``{"t": "bytes", "b64": ...}``
* ``{"t": "list", "items": [...]}``, ``{"t": "tuple", "items": [...]}``
* ``{"t": "dict", "items": [[key_node, value_node], ...]}`` (insertion order;
  keys are nodes too, so str vs bytes keys are explicit)
* ``{"t": "ndarray", "dtype": dtype.str, "shape": [...], "data_b64": raw
  C-order tobytes(), "values": nested tolist() (non-finite floats as the
  strings "nan"/"inf"/"-inf"), "layout": ...}``.  Large arrays carry
  ``"recipe"`` instead of ``data_b64``/``values``: ``{"kind": "arange_mod",
  "modulus": M}`` means ``(np.arange(prod(shape)) % M).astype(dtype)
  .reshape(shape)``; ``"sha256"`` is the hash of the raw C-order bytes.
  ``layout`` is ``{"kind": "c"}``, ``{"kind": "fortran"}`` (rebuild the C
  array, then ``np.asfortranarray``) or ``{"kind": "view", "base": <ndarray
  node>, "index": [[start, stop, step], ...]}`` (rebuild base, apply slices).
  Decoded arrays additionally carry ``"flags"`` (writeable / contiguity).
* ``{"t": "npscalar", "dtype": dtype.str, "v": item(), "data_b64": raw bytes}``
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import sys
from pathlib import Path

try:
    import msgpack
    import numpy as np
    import openpi_client
    from openpi_client import msgpack_numpy
except ImportError as exc:  # pragma: no cover - guard for the wrong interpreter
    sys.exit(
        f"make_vectors.py must be run with the openpi-client venv "
        f"(/work/venvs/openpi/bin/python); import failed: {exc}"
    )

if int(np.__version__.split(".")[0]) >= 2:  # pragma: no cover
    sys.exit("make_vectors.py expects numpy<2 (the openpi-client venv); got " + np.__version__)

OUT = Path(__file__).resolve().parent
BIG = 4096  # arrays with more elements than this are stored as a recipe


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


# --------------------------------------------------------------------------- encoding


def _scalar_json(x):
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def _values_json(v):
    if isinstance(v, list):
        return [_values_json(e) for e in v]
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    return _scalar_json(v)


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def _array_node(a: np.ndarray, *, recipe=None, layout=None, decoded=False) -> dict:
    raw = a.tobytes()
    node = {"t": "ndarray", "dtype": a.dtype.str, "shape": list(a.shape)}
    if recipe is not None or a.size > BIG:
        if recipe is None:
            raise ValueError("large array needs a recipe")
        node["recipe"] = recipe
    else:
        node["data_b64"] = _b64(raw)
        if a.dtype.kind in "mM":
            # datetime/timedelta: tolist() gives datetime objects; store int64 ticks.
            node["values"] = a.astype(np.int64).tolist()
            node["values_kind"] = "int64_ticks"
        else:
            node["values"] = _values_json(a.tolist())
    node["sha256"] = hashlib.sha256(raw).hexdigest()
    node["layout"] = layout or {"kind": "c"}
    if decoded:
        node["flags"] = {
            "writeable": bool(a.flags.writeable),
            "c_contiguous": bool(a.flags.c_contiguous),
            "f_contiguous": bool(a.flags.f_contiguous),
            "owndata": bool(a.flags.owndata),
        }
        node["python_type"] = type(a).__module__ + "." + type(a).__qualname__
    return node


def encode(obj, *, decoded=False, recipes=None) -> dict:
    """Encode a Python/numpy object tree as a JSON-able tagged tree."""
    recipes = recipes or {}
    if isinstance(obj, np.ndarray):
        meta = recipes.get(id(obj)) if not decoded else None
        if decoded and obj.size > BIG:
            # Decoded large arrays: find the recipe by content hash.
            digest = hashlib.sha256(obj.tobytes()).hexdigest()
            meta = {"recipe": recipes.get(("sha", digest))}
        meta = meta or {}
        layout = meta.get("layout")
        if layout and layout.get("kind") == "view":
            layout = dict(layout, base=encode(layout["base"]))
        return _array_node(obj, recipe=meta.get("recipe"), layout=layout, decoded=decoded)
    if isinstance(obj, np.generic):
        node = {"t": "npscalar", "dtype": obj.dtype.str, "v": _values_json(obj.item()),
                "data_b64": _b64(obj.tobytes())}
        if decoded:
            node["python_type"] = type(obj).__module__ + "." + type(obj).__qualname__
        return node
    if obj is None:
        return {"t": "none"}
    if isinstance(obj, bool):
        return {"t": "bool", "v": obj}
    if isinstance(obj, int):
        return {"t": "int", "v": int(obj)}
    if isinstance(obj, float):
        return {"t": "float", "v": _scalar_json(float(obj)), "hex": float(obj).hex()}
    if isinstance(obj, str):
        return {"t": "str", "v": str(obj)}
    if isinstance(obj, (bytes, bytearray)):
        return {"t": "bytes", "b64": _b64(bytes(obj))}
    if isinstance(obj, tuple):
        return {"t": "tuple", "items": [encode(e, decoded=decoded, recipes=recipes) for e in obj]}
    if isinstance(obj, list):
        return {"t": "list", "items": [encode(e, decoded=decoded, recipes=recipes) for e in obj]}
    if isinstance(obj, dict):
        return {
            "t": "dict",
            "items": [
                [encode(k, decoded=decoded, recipes=recipes),
                 encode(v, decoded=decoded, recipes=recipes)]
                for k, v in obj.items()
            ],
        }
    raise TypeError(f"cannot encode {type(obj)!r}")


# --------------------------------------------------------------------------- cases

RECIPES: dict = {}


def image(shape=(224, 224, 3), modulus=251) -> np.ndarray:
    a = (np.arange(int(np.prod(shape))) % modulus).astype(np.uint8).reshape(shape)
    recipe = {"kind": "arange_mod", "modulus": modulus}
    RECIPES[id(a)] = {"recipe": recipe}
    RECIPES[("sha", hashlib.sha256(a.tobytes()).hexdigest())] = recipe
    return a


def state8() -> np.ndarray:
    return np.array([0.1, -0.2, 0.3, -0.4, 0.5, 1.0, -1.0, 0.0], dtype=np.float32)


def fortran34() -> np.ndarray:
    a = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5)
    assert not a.flags.c_contiguous
    RECIPES[id(a)] = {"layout": {"kind": "fortran"}}
    return a


def view_noncontig() -> np.ndarray:
    base = np.arange(24, dtype=np.float32).reshape(4, 6) - 10.25
    v = base[::2, 1::2]
    assert not v.flags.c_contiguous and not v.flags.f_contiguous
    RECIPES[id(v)] = {
        "layout": {"kind": "view", "base": base, "index": [[None, None, 2], [1, None, 2]]}
    }
    return v


def build_cases() -> list[tuple[str, str, object]]:
    img = image()
    cases = [
        ("state_f32_8", "float32 [8] robot state", state8()),
        ("image_u8_224x224x3", "uint8 [224,224,3] image, arange % 251", img),
        ("f64_2x3", "float64 [2,3]",
         np.array([[1.0, -2.5, 3.141592653589793], [1e-300, 6.02e23, -0.0]], dtype=np.float64)),
        ("f64_special", "float64 nan/inf/-inf/-0.0",
         np.array([np.nan, np.inf, -np.inf, -0.0], dtype=np.float64)),
        ("i64_5", "int64 [5] incl. extremes",
         np.array([0, -1, 2**53 + 1, np.iinfo(np.int64).max, np.iinfo(np.int64).min],
                  dtype=np.int64)),
        ("bool_3", "bool [3]", np.array([True, False, True])),
        ("i8_small", "int8 [4]", np.array([-128, -1, 0, 127], dtype=np.int8)),
        ("i16_small", "int16 [2,2]", np.array([[-32768, -2], [3, 32767]], dtype=np.int16)),
        ("u16_small", "uint16 [3]", np.array([0, 1, 65535], dtype=np.uint16)),
        ("f16_small", "float16 [4]", np.array([0.5, -1.0, 65504.0, 0.0999], dtype=np.float16)),
        ("i32_small", "int32 [3]", np.array([-(2**31), 0, 2**31 - 1], dtype=np.int32)),
        ("u32_small", "uint32 [2]", np.array([0, 2**32 - 1], dtype=np.uint32)),
        ("u64_small", "uint64 [2]", np.array([0, 2**64 - 1], dtype=np.uint64)),
        ("f32_0d", "0-d float32 array (shape [])", np.array(2.25, dtype=np.float32)),
        ("f32_empty_0x4", "empty float32 [0,4]", np.zeros((0, 4), dtype=np.float32)),
        ("npscalar_f32", "np.float32(1.5) -> __npgeneric__", np.float32(1.5)),
        ("npscalar_i64", "np.int64(7) -> __npgeneric__", np.int64(7)),
        ("npscalar_bool", "np.bool_(True) -> __npgeneric__", np.bool_(True)),
        ("npscalar_u8", "np.uint8(200) -> __npgeneric__", np.uint8(200)),
        ("npscalar_f64", "np.float64(1.5): float subclass, packed as plain msgpack float64",
         np.float64(1.5)),
        ("npscalar_str", "np.str_('ab'): str subclass, packed as plain msgpack str",
         np.str_("ab")),
        ("observation", "full observation dict",
         {"observation/image": image(), "observation/state": state8(), "terminated": False}),
        ("action", "action dict float32 [10,7]",
         {"actions": (np.arange(70, dtype=np.float32).reshape(10, 7) / 8.0 - 4.0)}),
        ("action_with_server_timing", "server response incl. server_timing",
         {"actions": np.ones((2, 7), dtype=np.float32) * 0.25,
          "server_timing": {"infer_ms": 12.5, "prev_total_ms": 40.125}}),
        ("nested_mixed", "nested dict/list with Python scalars, str, bytes, None, arrays",
         {"a": 1, "neg": -5, "big": 2**40, "f": 0.1, "t": True, "n": None,
          "s": "h\u00e9llo", "b": b"\x00\xffraw",
          "lst": [1, "two", 3.0, None, np.array([1, 2], dtype=np.int32), [b"", []]],
          "tup": (1, 2, np.float32(0.5)),
          "inner": {"arr": np.array([[1.5, 2.5]], dtype=np.float64), "empty": {}}}),
        ("f32_fortran_3x4", "Fortran-ordered float32 [3,4]", fortran34()),
        ("f32_view_noncontig", "non-contiguous view base[::2, 1::2] of float32 [4,6]",
         view_noncontig()),
        ("f32_bigendian", "big-endian '>f4' [3]", np.array([1.0, -2.0, 0.5], dtype=">f4")),
        ("i32_bigendian", "big-endian '>i4' [2]", np.array([1, -2], dtype=">i4")),
        ("str_array_u4", "unicode '<U4' array (kind U is NOT rejected)",
         np.array(["ab", "cdef"])),
        ("datetime64_s", "datetime64[s] array (kind M is NOT rejected)",
         np.array(["2024-01-01T00:00:00", "1970-01-01T00:00:01"], dtype="datetime64[s]")),
        ("metadata", "server metadata-like dict with str keys and nested values",
         {"policy_name": "pi0_fast_droid", "action_horizon": 10, "action_dim": 7,
          "image_keys": ["observation/image", "observation/wrist_image"],
          "norm": {"mean": [0.0, 0.5], "std": [1.0, 2.0]}, "reset_pose": None,
          "version": "0.1"}),
        ("empty_dict", "empty metadata {} (server default)", {}),
    ]
    return cases


def unsupported() -> list[dict]:
    probes = [
        ("complex128 array", "np.zeros(2, dtype=np.complex128)",
         lambda: np.zeros(2, dtype=np.complex128)),
        ("complex64 array", "np.zeros(2, dtype=np.complex64)",
         lambda: np.zeros(2, dtype=np.complex64)),
        ("complex128 scalar", "np.complex128(1+2j)", lambda: np.complex128(1 + 2j)),
        ("python complex", "1+2j", lambda: 1 + 2j),
        ("object array", "np.array([None, 1], dtype=object)",
         lambda: np.array([None, 1], dtype=object)),
        ("void array", "np.zeros(2, dtype='V4')", lambda: np.zeros(2, dtype="V4")),
        ("structured array", "np.zeros(2, dtype=[('a', '<i4')])",
         lambda: np.zeros(2, dtype=[("a", "<i4")])),
        ("void scalar", "np.zeros(2, dtype=[('a', '<i4')])[0]",
         lambda: np.zeros(2, dtype=[("a", "<i4")])[0]),
        ("nested object array in dict", "{'x': np.array([1], dtype=object)}",
         lambda: {"x": np.array([1], dtype=object)}),
    ]
    out = []
    for name, expr, make in probes:
        rec = {"name": name, "expr": expr, "op": "packb"}
        try:
            b = msgpack_numpy.packb(make())
            rec.update(raises=None, packed_b64=_b64(b))
        except Exception as exc:  # noqa: BLE001 - recording behaviour
            rec.update(raises=type(exc).__name__, message=str(exc))
        out.append(rec)
    # Non-str/bytes map keys pack fine but unpackb (strict_map_key=True) rejects them.
    b = msgpack_numpy.packb({1: 2})
    rec = {"name": "int map key", "expr": "{1: 2}", "op": "unpackb(packb(x))",
           "packed_b64": _b64(b)}
    try:
        msgpack_numpy.unpackb(b)
        rec["raises"] = None
    except Exception as exc:  # noqa: BLE001
        rec.update(raises=type(exc).__name__, message=str(exc))
    out.append(rec)
    return out


def main() -> None:
    cases = build_cases()
    entries = []
    total = 0
    for name, desc, obj in cases:
        packed = msgpack_numpy.packb(obj)
        # The client and server use a Packer instance; it must give identical bytes.
        assert msgpack_numpy.Packer().pack(obj) == packed, name
        decoded = msgpack_numpy.unpackb(packed)
        (OUT / f"{name}.msgpack").write_bytes(packed)
        total += len(packed)
        entries.append({
            "name": name,
            "description": desc,
            "file": f"{name}.msgpack",
            "size": len(packed),
            "sha256": hashlib.sha256(packed).hexdigest(),
            "input": encode(obj, recipes=RECIPES),
            "decoded": encode(decoded, decoded=True, recipes=RECIPES),
        })
    doc = {
        "generator": "tests/helpers/data/wire_vectors/make_vectors.py",
        "versions": {
            "openpi-client": _version("openpi-client"),
            "msgpack": ".".join(map(str, msgpack.version)),
            "numpy": np.__version__,
            "python": sys.version.split()[0],
        },
        "wire_format": {
            "pack": "msgpack.packb(obj, default=pack_array); msgpack defaults "
                    "(use_bin_type=True, use_single_float=False, strict_types=False)",
            "unpack": "msgpack.unpackb(b, object_hook=unpack_array); msgpack defaults "
                      "(raw=False, strict_map_key=True, use_list=True)",
            "ndarray_map": "bin keys in order __ndarray__ (true), data (bin, C-order "
                           "tobytes), dtype (str, dtype.str), shape (array of ints)",
            "npgeneric_map": "bin keys in order __npgeneric__ (true), data (item() as "
                             "native msgpack value), dtype (str, dtype.str)",
            "rejected_kinds": ["V", "O", "c"],
        },
        "cases": entries,
        "unsupported": unsupported(),
    }
    (OUT / "cases.json").write_text(json.dumps(doc, indent=1, ensure_ascii=True) + "\n")
    print(f"wrote {len(entries)} cases, {total} bytes of msgpack, to {OUT}")


if __name__ == "__main__":
    main()
