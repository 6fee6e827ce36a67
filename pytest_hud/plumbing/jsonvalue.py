"""JSON as Python types, named once for the whole package: what ``json.loads`` gives back and
``json.dumps`` takes (results files, ledgers, wire frames, manifests)."""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["JSONObject", "JSONScalar", "JSONValue"]

#: a JSON leaf (a number may be either int or float, as ``json.loads`` reads it)
JSONScalar: TypeAlias = str | int | float | bool | None
#: any JSON document or part of one
JSONValue: TypeAlias = JSONScalar | list["JSONValue"] | dict[str, "JSONValue"]
#: a JSON object, as ``json.loads`` builds it
JSONObject: TypeAlias = dict[str, JSONValue]
