"""gNMI deletes: a `delete` path drops every series at or below it.

A notification's delete paths are relative to its prefix, like its update paths. SONiC deletes
a table key by sending it as an empty JSON entry instead (`{"Ethernet0": {}}`, json_values.py),
which drops the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pygnmi.spec.v080 import gnmi_pb2 as pb

from .bindings import Binding
from .paths import ElemPath, from_proto, path_covers


def under(target: ElemPath) -> Callable[[Binding], bool]:
    """Whether a binding's path is at or below `target`: what deleting `target` drops."""
    return lambda b: path_covers(target, b.path)


def delete_targets(prefix: ElemPath, raw_prefix: bytes, deletes: Iterable[bytes],
                   strip: bool) -> list[ElemPath]:
    """The full paths of a notification's delete paths (raw gnmi.Path bytes under the prefix,
    given decoded or, for a prefix not seen before, raw). Raises DecodeError."""
    if raw_prefix:
        prefix = from_proto(pb.Path.FromString(raw_prefix), strip)
    return [prefix + from_proto(pb.Path.FromString(d), strip) for d in deletes]
