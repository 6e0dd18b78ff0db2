"""Runs of small families written in one pass: a node's ~300 one-series family instances.

A node render is ~60 families over ~270 instances, most of them one series (a device's or a
port's counter). Written family by family and instance by instance, the fixed cost of each
(encoder and cache look-ups, a call, a string, a chunk) outweighed its one line. A run keeps the
whole sample prefix of every series of a sequence of families (the family's header folded into
its first series' prefix) together with the layout it was built for: the families' encoders,
each instance's owner and series count, and the series keys, in render order. A render lists
the current layout and values with C-level loops; when the layout equals the kept one (the usual case:
the same devices, ports and counters poll after poll), the prefixes are reused as they are and
the text is one join of prefixes and formatted values. Any difference rebuilds the run's
prefixes, so the output is always what the family encoders would write.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain, repeat
from operator import add, itemgetter
from typing import Any, cast

from .family import FamilyEncoder
from .floats import EXACT_INT, EXPONENT, go_float
from .prefixes import PrefixCaches

Instances = list[tuple[tuple[str, str], Mapping[Any, Any]]]

# A family is written in a run when its instances hold at most this many series in all (and it
# is a plain one: FamilyEncoder.shared_blocks). Larger ones (a fabric's gNMI columns) keep their
# chunk per instance, which a gzip scrape compresses as it comes.
RUN_MAX_SERIES = 256

_FIRST, _SECOND = itemgetter(0), itemgetter(1)


def fits_a_run(encoder: FamilyEncoder, instances: Instances) -> bool:
    """Whether the family (its instances, each with a series at least) is written in a run."""
    return encoder.shared_blocks and sum(map(len, map(_SECOND, instances))) <= RUN_MAX_SERIES


def format_values(values: list[Any]) -> list[str]:
    """go_float of each value, the integers (most counters of a node) without the call: a small
    one as "<digits>.0", a large one (bytes, packets) from its digits in Go's exponent form."""
    return [f"{v}.0" if type(v) is int and -1000000 < v < 1000000
            else f"{(d := str(v))[0]}.{d[1:]}".rstrip("0.") + EXPONENT[len(d)]
            if type(v) is int and 0 < v <= EXACT_INT else go_float(v)
            for v in values]


class Run:
    """The kept prefixes of one run of families and the layout they were built for."""

    __slots__ = ("layout", "prefixes", "bare")

    def __init__(self) -> None:
        self.layout: list[Any] = []
        self.prefixes: list[str] = []  # each series' prefix, a family's header before its first
        self.bare: list[str] = []  # the same without the headers

    def render(self, families: list[tuple[FamilyEncoder, Instances]], caches: PrefixCaches) -> str:
        """The headers and sample lines of `families`, as FamilyEncoder.instances writes them."""
        # Listed with C-level loops, no Python step per instance: the encoders (compared by
        # identity: a family, style and header of their own), instances per family, owners and
        # series counts per instance, then every key. Together they read one way only.
        instances = list(chain.from_iterable(map(_SECOND, families)))
        series_dicts = list(map(_SECOND, instances))
        layout = [list(map(_FIRST, families)), list(map(len, map(_SECOND, families))),
                  list(map(_FIRST, instances)), list(map(len, series_dicts)),
                  list(chain.from_iterable(series_dicts))]
        values = [value for series in series_dicts for value in series.values()]
        if layout != self.layout:
            self._rebuild(families, caches)
            self.layout = layout
        return "\n".join(map(add, self.prefixes, format_values(values))) + "\n"

    def _kept(self) -> dict[tuple[tuple[FamilyEncoder, tuple[str, str]], Any], str]:
        """The kept bare prefixes by ((encoder, owner), key), read off the kept layout."""
        encoders, counts, owners, lengths, keys = self.layout or ([], [], [], [], [])
        encoder_of_instance = chain.from_iterable(map(repeat, encoders, counts))
        instance_of_series = chain.from_iterable(map(repeat, zip(encoder_of_instance, owners), lengths))
        return dict(zip(zip(instance_of_series, keys), self.bare))

    def _rebuild(self, families: list[tuple[FamilyEncoder, Instances]], caches: PrefixCaches) -> None:
        """New prefixes for a new layout: those of series the run had already are taken as they
        were (a source whose keys changed rebuilds its own series, not the whole run)."""
        kept = self._kept()
        bare: list[str] = []
        prefixes: list[str] = []
        for encoder, instances in families:
            first = len(bare)
            for owner, series in instances:
                where = (encoder, owner)
                found = [kept.get((where, key)) for key in series]
                if None in found:
                    blocks = encoder.cache(caches, owner).lookup(series, encoder.block, encoder.family.name)
                    found = [encoder.head + block for block in blocks]
                bare.extend(cast(list[str], found))  # no None left
            prefixes.extend(bare[first:])
            prefixes[first] = encoder.header + prefixes[first]  # instances hold a series at least
        self.bare, self.prefixes = bare, prefixes
