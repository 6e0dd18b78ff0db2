"""A switch's port list as the switch itself publishes it: names, vendor aliases, speeds.

SONiC keys ports two ways. APPL_DB tables (PORT_TABLE, LLDP_ENTRY_TABLE) use the SONiC name
(`Ethernet0`); sonic-gnmi's COUNTERS_DB wildcard virtual paths (`COUNTERS/Ethernet*/...`,
`.../Queues`, `.../Pfcwd`, `PERIODIC_WATERMARKS/Ethernet*/PriorityGroups`) key them by the
CONFIG_DB PORT `alias` when the port has one (`etp10`, `Ethernet1/1`) and by the name otherwise
(sonic_data_client/virtual_db.go: name2aliasMap). APPL_DB PORT_TABLE carries the same `alias`
field, so one whole-table subscription gives the map, and every series gets the SONiC name as its
`interface` label whatever key its path used.

`PortTable` holds that map and the speeds (for pause quanta -> seconds). It is `known` once the
table arrived (a whole-table subscription sends the full table first) or once the session synced
without it: before that, a key we cannot place yet is held back rather than exported under a
label that would later change.
"""

from __future__ import annotations

from typing import Any


class PortTable:
    __slots__ = ("alias_of", "name_of_alias", "speed_bps", "known", "alias_field", "speed_field")

    def __init__(self, alias_field: str, speed_field: str) -> None:
        self.alias_field = alias_field
        self.speed_field = speed_field
        self.alias_of: dict[str, str] = {}  # port name -> alias
        self.name_of_alias: dict[str, str] = {}  # alias -> port name
        self.speed_bps: dict[str, float] = {}  # port name -> bit/s
        self.known = False

    def name(self, key: str) -> str | None:
        """The port name a wildcard key stands for (an alias first: that is what sonic-gnmi puts
        there when one exists), the key itself when it is a port name, else None."""
        found = self.name_of_alias.get(key)
        if found is not None:
            return found
        return key if key in self.alias_of else None

    def update(self, doc: Any) -> set[str]:
        """Take one reply of the table ({name: {field: value}}; an empty entry is a deleted port).
        Returns the keys (names and aliases) whose translation changed, so that series bound under
        them can be bound again."""
        self.known = True
        changed: set[str] = set()
        if not isinstance(doc, dict):
            return changed
        for name, fields in doc.items():
            if not isinstance(fields, dict):
                continue
            old_alias = self.alias_of.get(name)
            if not fields:  # deleted
                if old_alias is not None:
                    del self.alias_of[name]
                    if self.name_of_alias.get(old_alias) == name:
                        del self.name_of_alias[old_alias]
                    changed.update((name, old_alias))
                self.speed_bps.pop(name, None)
                continue
            alias = fields.get(self.alias_field) if self.alias_field else None
            alias = alias if isinstance(alias, str) and alias else name
            if old_alias != alias:
                if old_alias is not None and self.name_of_alias.get(old_alias) == name:
                    del self.name_of_alias[old_alias]
                    changed.add(old_alias)
                self.alias_of[name] = alias
                if alias != name:
                    self.name_of_alias[alias] = name
                changed.update((name, alias))
            speed = _mbps(fields.get(self.speed_field)) if self.speed_field else None
            if speed is None:
                self.speed_bps.pop(name, None)
            else:
                self.speed_bps[name] = speed * 1e6
        return changed


def _mbps(value: Any) -> float | None:
    try:
        speed = float(value)
    except (TypeError, ValueError):
        return None
    return speed if speed > 0 else None
