"""Well-known types on the wire: JSON values as google.protobuf.Value and Struct (tool inputs and
outputs, event data), and timestamps."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2

# Numbers travel as doubles: integers beyond 2**53 would not come back as themselves.
_EXACT_INTEGERS = 2**53


def to_value(value: Any) -> struct_pb2.Value:
    """A JSON value (None, bool, int, float, str, lists and str-keyed mappings of them) as a Value."""
    message = struct_pb2.Value()
    if value is None:
        message.null_value = struct_pb2.NULL_VALUE
    elif isinstance(value, bool):
        message.bool_value = value
    elif isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise TypeError(f"{value!r} is not a JSON number")
        message.number_value = value
    elif isinstance(value, str):
        message.string_value = value
    elif isinstance(value, Mapping):
        message.struct_value.CopyFrom(to_struct(value))
    elif isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        message.list_value.values.extend(to_value(item) for item in value)
    else:
        raise TypeError(f"{type(value).__name__} is not a JSON value")
    return message


def is_json_value(value: Any) -> bool:
    """Whether `to_value` takes `value` (a cycle is not a JSON value either)."""
    try:
        to_value(value)
        return True
    except (TypeError, RecursionError):
        return False


def to_struct(mapping: Mapping[Any, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    for key, item in mapping.items():
        if not isinstance(key, str):
            raise TypeError(f"JSON object keys are strings, not {type(key).__name__}")
        message.fields[key].CopyFrom(to_value(item))
    return message


def from_value(message: struct_pb2.Value) -> Any:
    """The Value as Python's json module would read its JSON text: whole numbers as ints."""
    kind = message.WhichOneof("kind")
    if kind == "number_value":
        number = message.number_value
        return int(number) if number.is_integer() and abs(number) <= _EXACT_INTEGERS else number
    if kind == "string_value":
        return message.string_value
    if kind == "bool_value":
        return message.bool_value
    if kind == "struct_value":
        return from_struct(message.struct_value)
    if kind == "list_value":
        return [from_value(item) for item in message.list_value.values]
    return None


def from_struct(message: struct_pb2.Struct) -> dict[str, Any]:
    return {key: from_value(item) for key, item in message.fields.items()}


def datetime_of(timestamp: timestamp_pb2.Timestamp) -> datetime:
    return timestamp.ToDatetime(tzinfo=timezone.utc)


def optional_datetime_of(message: Any, field: str) -> datetime | None:
    """A timestamp field the server leaves unset until something happened (a session's end)."""
    return datetime_of(getattr(message, field)) if message.HasField(field) else None
