"""Writing one decoded leaf value that is not a plain number into its series.

Plain numbers go straight into their column (`Binding.column`, on both ingest paths); what needs
a meaning first comes here: enum strings mapped to numbers, time stamps, `_info` parts (their
text becomes a label of the entity's series) and counters in bit times, turned into seconds at
the port's current speed.
"""

from __future__ import annotations

from typing import Any

from .bindings import Binding
from .paths import strip_module
from .ports import PortTable
from .values import MalformedValue, to_number, utc_timestamp


class SeriesWriter:
    __slots__ = ("ports", "_quanta")

    def __init__(self, ports: PortTable | None) -> None:
        self.ports = ports
        self._quanta: dict[tuple[str, tuple[str, ...]], float] = {}  # per-speed series: last raw value

    def set(self, b: Binding, value: Any) -> None:
        """Write `value` (a scalar or a JSON leaf) through `b`; raises MalformedValue."""
        entity = b.entity
        if entity is not None:
            if isinstance(value, (dict, list)):
                raise MalformedValue("expected a scalar")
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
            if entity.values.get(b.rule.info_label) != text:
                entity.values[b.rule.info_label] = text
                entity.refresh(b.rule.info_labels)
            return
        rule = b.rule
        if rule.values is not None and isinstance(value, str):
            number = rule.values.get(value)
            if number is None:
                number = rule.values.get(strip_module(value))  # identityref values may be qualified
            if number is None:
                if rule.default is None:
                    raise MalformedValue(f"unknown value {value[:40]!r}")
                number = rule.default
            b.series[b.labels] = number
            return
        if rule.time_format:
            b.series[b.labels] = utc_timestamp(value, rule.time_format)
            return
        if rule.per_port_speed:
            self._set_per_speed(b, to_number(value))
            return
        b.series[b.labels] = to_number(value) * b.rule.scale

    def _set_per_speed(self, b: Binding, raw: float) -> None:
        """A counter in bit times (SAI pause quanta x 512): seconds at the port's current speed,
        accumulated delta by delta, so a speed change never makes the counter jump back."""
        rule = b.rule
        port = b.labels[rule.family.labels.index("interface")]
        speed = self.ports.speed_bps.get(port) if self.ports is not None else None
        if speed is None:
            return  # not yet known: no series rather than a wrong one
        key = (rule.family.name, b.labels)
        last = self._quanta.get(key)
        self._quanta[key] = raw
        if last is None or b.labels not in b.series:
            b.series[b.labels] = raw * b.rule.scale / speed
            return
        delta = raw - last if raw >= last else raw  # a reset on the switch starts from 0
        b.series[b.labels] = float(b.series[b.labels]) + delta * b.rule.scale / speed

    def forget(self, b: Binding) -> None:
        """`b` (a per-speed series) is removed: its next value starts the series afresh."""
        self._quanta.pop((b.rule.family.name, b.labels), None)
