"""Wire-compatible views of gNMI messages, for decoding streamed notifications in bulk.

Protobuf encodes an embedded message exactly like a `bytes` field, and merges every occurrence
of a non-repeated message field into one (their repeated fields concatenate). Parsing the same
SubscribeResponse bytes with other schemas therefore gives other shapes of the same data, all
decoded in C:

  - `SubscribeResponse` (the bulk view) declares a notification's repeated `update` as ONE
    merged `Updates`, which declares only `val`: every update's TypedValue merges into one
    `Values`, whose repeated fields hold, per value kind and in order, all the values, and every
    update's path field, undeclared, is kept as unknown-field bytes, exactly as sent and in
    order. Once `val` is cleared, serializing the merged `Updates` gives those path fields as
    one bytes object: the notification's shape. When every update carries a path and one
    number (a SAMPLE of counters), a single parse yields the shape and the numbers, with no
    Python object per leaf;
  - `Shape` rebuilds that shape from decoded paths (one length-delimited field 1 per path), to
    check a shape against the updates it stands for;
  - `RawSubscribeResponse` keeps each update as its own raw bytes (`Update`: path bytes +
    TypedValue bytes), for the general per-update path that handles everything else (strings,
    enums, JSON subtrees, missing or mixed values).

The views live in their own descriptor pool and package, so they never clash with the one gNMI
stub set (pygnmi's) in the default pool. Field numbers follow gnmi.proto v0.8.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_PACKAGE = "infrapulse.gnmi_wire"

# TypedValue members whose repeated form yields numbers directly: the bulk fast path takes these.
NUMERIC_KINDS = ("uint_val", "int_val", "double_val", "float_val", "bool_val")

_TYPED_VALUE_FIELDS = (
    # (name, field number, type in the Values view)
    ("string_val", 1, _F.TYPE_STRING),
    ("int_val", 2, _F.TYPE_INT64),
    ("uint_val", 3, _F.TYPE_UINT64),
    ("bool_val", 4, _F.TYPE_BOOL),
    ("bytes_val", 5, _F.TYPE_BYTES),
    ("float_val", 6, _F.TYPE_FLOAT),
    ("decimal_val", 7, _F.TYPE_BYTES),
    ("leaflist_val", 8, _F.TYPE_BYTES),
    ("any_val", 9, _F.TYPE_BYTES),
    ("json_val", 10, _F.TYPE_BYTES),
    ("json_ietf_val", 11, _F.TYPE_BYTES),
    ("ascii_val", 12, _F.TYPE_STRING),
    ("proto_bytes", 13, _F.TYPE_BYTES),
    ("double_val", 14, _F.TYPE_DOUBLE),
)


def _field(name: str, number: int, kind: _F.Type.ValueType, repeated: bool = False, message: str = "",
           oneof: int | None = None) -> descriptor_pb2.FieldDescriptorProto:
    field = _F(name=name, number=number, type=kind,
               label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
    if message:
        field.type_name = f".{_PACKAGE}.{message}"
    if oneof is not None:
        field.oneof_index = oneof
    return field


def _file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="infrapulse/gnmi_wire.proto", package=_PACKAGE,
                                              syntax="proto3")
    for response_name, notification_name in (("SubscribeResponse", "Notification"),
                                             ("RawSubscribeResponse", "RawNotification")):
        response = file.message_type.add(name=response_name)
        response.oneof_decl.add(name="response")
        response.field.extend([
            _field("update", 1, _F.TYPE_MESSAGE, message=notification_name, oneof=0),
            _field("sync_response", 3, _F.TYPE_BOOL, oneof=0),
            _field("error", 4, _F.TYPE_BYTES, oneof=0),  # a gnmi.Error, decoded only when it happens
        ])
    file.message_type.add(name="Notification").field.extend([
        _field("timestamp", 1, _F.TYPE_INT64),
        _field("prefix", 2, _F.TYPE_BYTES),
        _field("update", 4, _F.TYPE_MESSAGE, message="Updates"),  # singular: all updates merge
        _field("delete", 5, _F.TYPE_BYTES, repeated=True),
    ])
    file.message_type.add(name="Updates").field.extend([
        # no `path` (1): the paths stay unknown-field bytes, the shape
        _field("val", 3, _F.TYPE_MESSAGE, message="Values"),  # singular: all values merge
    ])
    file.message_type.add(name="Shape").field.extend([_field("path", 1, _F.TYPE_BYTES, repeated=True)])
    file.message_type.add(name="Values").field.extend(
        _field(name, number, kind, repeated=True) for name, number, kind in _TYPED_VALUE_FIELDS)
    file.message_type.add(name="RawNotification").field.extend([
        _field("timestamp", 1, _F.TYPE_INT64),
        _field("prefix", 2, _F.TYPE_BYTES),
        _field("update", 4, _F.TYPE_BYTES, repeated=True),
        _field("delete", 5, _F.TYPE_BYTES, repeated=True),
    ])
    file.message_type.add(name="Update").field.extend([
        _field("path", 1, _F.TYPE_BYTES),
        _field("val", 3, _F.TYPE_BYTES),
    ])
    return file


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())


def _message(name: str) -> Any:
    """A view's message class. Typed Any: classes built from a descriptor at run time have fields
    the type checker cannot see (`.update`, `.val`, `FromString`), so this is their boundary."""
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.{name}"))


SubscribeResponse = _message("SubscribeResponse")  # the bulk view: paths and values merged
RawSubscribeResponse = _message("RawSubscribeResponse")  # each update kept as raw bytes
Update = _message("Update")  # one raw update: path bytes + TypedValue bytes
Shape = _message("Shape")  # the path fields of a notification's updates, as the bulk view keeps them


def raw_updates(raw: bytes) -> Any:
    """Each update of the notification in SubscribeResponse bytes `raw`, as its own raw bytes."""
    return RawSubscribeResponse.FromString(raw).update.update


__all__ = ["NUMERIC_KINDS", "RawSubscribeResponse", "Shape", "SubscribeResponse", "Update", "raw_updates"]
