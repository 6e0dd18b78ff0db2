"""Source `dcgm`: read an existing dcgm-exporter /metrics and map DCGM_FI_* into infrapulse_gpu_*.

Units are converted to base units (MiB -> bytes, mJ -> J, % -> ratio, MHz -> Hz, ns -> s).
DCGM's "no data" sentinels are dropped (int64 values >= 0x7ffffffffffffff0, float values
>= 2**47 = DCGM_FP64_BLANK), so a field DCGM cannot read is absent, not a huge number.
Labels: `gpu`; the GPU UUID from `UUID`, `uuid` or `gpu_uuid`; MIG `GPU_I_ID` ->
gpu_instance and `GPU_I_PROFILE` -> mig_profile; `pod`, `namespace`, `container` kept. The
host label (`Hostname` up to dcgm-exporter 4.5.x, `hostname` after) is accepted in both
spellings and not exported — Prometheus adds the target's own labels — but a host that is
not this daemon's is logged once (the url probably points at another node).

When the nvml source runs on the same node, this source exports only the families matching
`owns` (default: the profiling families, which NVML does not measure), and nvml leaves those
out; see gpu_families.Ownership. The HTTP side is infrapulse.scrape (timeout, size bound,
retry).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from ... import catalog
from ...schema import Bool, Duration, Int, ListOf, Str, setting, settings
from ...scrape import ScrapeError, Scraper, ScrapeTarget
from ...store import Snapshot
from ...textparse import MetricFamily
from ..base import PollingSettings, PollingSource, SourceContext, TargetResult
from ..budget import SeriesBudget
from . import families as fam

TARGET = "dcgm"
INT64_BLANK = float(0x7FFFFFFFFFFFFFF0)  # DCGM_INT64_BLANK; NOT_FOUND/NOT_SUPPORTED/... are just above
FP64_BLANK = float(2**47)  # DCGM_FP64_BLANK = 140737488355328.0
MIB = float(1 << 20)


@dataclass(frozen=True)
class Mapping:
    family: catalog.Family
    extra: tuple[str, ...] = ()  # label values after (gpu, uuid)
    scale: float = 1.0
    floating: bool = False  # a DCGM double field: its blank sentinel is 2**47, not 2**63


def _m(family: catalog.Family, extra: tuple[str, ...] = (), scale: float = 1.0,
       floating: bool = False) -> Mapping:
    return Mapping(family, tuple(extra), scale, floating)


FIELD_MAP: dict[str, Mapping] = {
    "DCGM_FI_DEV_GPU_UTIL": _m(fam.UTILIZATION, scale=0.01),
    "DCGM_FI_DEV_MEM_COPY_UTIL": _m(fam.MEMORY_UTILIZATION, scale=0.01),
    "DCGM_FI_DEV_FB_USED": _m(fam.MEMORY_USED, scale=MIB),
    "DCGM_FI_DEV_FB_TOTAL": _m(fam.MEMORY_TOTAL, scale=MIB),
    "DCGM_FI_DEV_FB_RESERVED": _m(fam.MEMORY_RESERVED, scale=MIB),
    "DCGM_FI_DEV_POWER_USAGE": _m(fam.POWER, floating=True),
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": _m(fam.POWER_LIMIT, floating=True),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": _m(fam.ENERGY, scale=1e-3),
    "DCGM_FI_DEV_GPU_TEMP": _m(fam.TEMPERATURE, ("gpu",)),
    "DCGM_FI_DEV_MEMORY_TEMP": _m(fam.TEMPERATURE, ("memory",)),
    "DCGM_FI_DEV_SM_CLOCK": _m(fam.CLOCK, ("sm",), scale=1e6),
    "DCGM_FI_DEV_MEM_CLOCK": _m(fam.CLOCK, ("memory",), scale=1e6),
    "DCGM_FI_DEV_PSTATE": _m(fam.PERFORMANCE_STATE),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": _m(fam.PCIE_REPLAYS),
    "DCGM_FI_DEV_XID_ERRORS": _m(fam.LAST_XID),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": _m(fam.ECC, ("corrected", "volatile")),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": _m(fam.ECC, ("uncorrected", "volatile")),
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": _m(fam.ECC, ("corrected", "aggregate")),
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": _m(fam.ECC, ("uncorrected", "aggregate")),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": _m(fam.REMAPPED_ROWS, ("correctable",)),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": _m(fam.REMAPPED_ROWS, ("uncorrectable",)),
    "DCGM_FI_DEV_ROW_REMAP_PENDING": _m(fam.ROW_REMAP_PENDING),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": _m(fam.ROW_REMAP_FAILURE),
    "DCGM_FI_DEV_RETIRED_SBE": _m(fam.RETIRED_PAGES, ("single_bit_ecc",)),
    "DCGM_FI_DEV_RETIRED_DBE": _m(fam.RETIRED_PAGES, ("double_bit_ecc",)),
    "DCGM_FI_DEV_RETIRED_PENDING": _m(fam.RETIRED_PAGES_PENDING),
    # Violation counters: ns in dcgm-exporter's counters files since 2025-12, microseconds before;
    # the unit is taken from the family's HELP ("(in us)" -> 1e-6, see _scale).
    "DCGM_FI_DEV_POWER_VIOLATION": _m(fam.VIOLATION, ("power",), scale=1e-9),
    "DCGM_FI_DEV_THERMAL_VIOLATION": _m(fam.VIOLATION, ("thermal",), scale=1e-9),
    "DCGM_FI_DEV_SYNC_BOOST_VIOLATION": _m(fam.VIOLATION, ("sync_boost",), scale=1e-9),
    "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION": _m(fam.VIOLATION, ("board_limit",), scale=1e-9),
    "DCGM_FI_DEV_LOW_UTIL_VIOLATION": _m(fam.VIOLATION, ("low_util",), scale=1e-9),
    "DCGM_FI_DEV_RELIABILITY_VIOLATION": _m(fam.VIOLATION, ("reliability",), scale=1e-9),
    "DCGM_FI_PROF_PCIE_TX_BYTES": _m(fam.PROFILING_PCIE, ("tx",)),
    "DCGM_FI_PROF_PCIE_RX_BYTES": _m(fam.PROFILING_PCIE, ("rx",)),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": _m(fam.PROFILING_NVLINK, ("tx",)),
    "DCGM_FI_PROF_NVLINK_RX_BYTES": _m(fam.PROFILING_NVLINK, ("rx",)),
    **{field: _m(family, floating=True) for field, family in fam.PROFILING.items()},
}
# Bitmask fields: one 0/1 series per clock event reason.
CLOCK_REASON_FIELDS = ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
_FB_PARTS = ("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED")
# On a MIG-enabled GPU dcgm-exporter writes one row per GPU instance (GPU_I_ID), and every row
# repeats the physical GPU's fields (power, energy, temperatures, clocks, PCIe, ECC, ...) read a
# moment apart (52.636 and 52.746 W on one A30, dcgm-3.x-a30mig-issue317.prom), with that
# instance's pod labels. Only these fields are the instance's own: its memory and the profiling
# ratios. Everything else is exported once per physical GPU, without MIG or pod labels.
PER_INSTANCE_FIELDS = frozenset({"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_TOTAL",
                                 "DCGM_FI_DEV_FB_RESERVED", *fam.PROFILING})
# Not measured for MIG instances: dcgm-exporter prints 0 there (maintainers in dcgm-exporter
# issues #50 and #216: use DCGM_FI_PROF_GR_ENGINE_ACTIVE). Dropped and counted as unmapped.
MIG_UNSUPPORTED = frozenset({"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL"})
# Fields of dcgm-exporter's default counter set (etc/default-counters.csv) that infrapulse maps:
# reported with 0 series when the exporter does not send them (a reduced -f counters file).
# MEMORY_TEMP is left out: GDDR boards (T4) have no memory sensor and dcgm-exporter omits it.
EXPECTED_FIELDS = ("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_GPU_TEMP",
                   "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
                   "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL",
                   "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED")
_CLOCK_EVENTS = "clock events"  # pseudo family of the physical-copy choice for the reason bitmask
SeriesKey = tuple[str, ...]


def is_blank(value: float, floating: bool) -> bool:
    """DCGM's 'no data' values: BLANK, NOT_FOUND, NOT_SUPPORTED, NOT_PERMISSIONED (and NaN)."""
    if value != value:
        return True
    return value >= (FP64_BLANK if floating else INT64_BLANK)


def _scale(mapping: Mapping, micro: bool) -> float:
    """A violation counter whose HELP says "(in us)" (counters files before 2025-12) is in µs."""
    return 1e-6 if micro and mapping.family is fam.VIOLATION else mapping.scale


def _uuid(labels: dict[str, str]) -> str:
    return labels.get("UUID") or labels.get("uuid") or labels.get("gpu_uuid") or ""


def _instance_rank(gpu_instance: str) -> float:
    """Order of a MIG row for the physical-copy choice: the GPU's own row (no GPU_I_ID) first."""
    if not gpu_instance:
        return -1.0
    try:
        return float(gpu_instance)
    except ValueError:
        return float("inf")


@dataclass
class _Copy:
    """The copy of a physical field kept so far for one (family, key) of a MIG GPU."""

    field: str
    rank: float
    value: float


@dataclass
class Unmapped:
    samples: int
    example: str


class _Series:
    """What one sample's labels say, worked out once per label dict: textparse shares one dict per
    label text across samples and scrapes, so a GPU's fields and scrapes reuse it (holding
    `labels` keeps its id unique while remembered)."""

    __slots__ = ("labels", "gpu", "uuid", "instance", "optional", "identity")

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels
        self.gpu = labels.get("gpu")
        self.uuid = _uuid(labels)
        self.instance = labels.get("GPU_I_ID", "")
        self.optional = (self.instance, labels.get("GPU_I_PROFILE", ""), labels.get("pod", ""),
                         labels.get("namespace", ""), labels.get("container", ""))
        self.identity = (self.gpu or "", self.uuid,
                         labels.get("modelName") or labels.get("model_name") or "",
                         labels.get("pci_bus_id", ""), labels.get("DCGM_FI_DRIVER_VERSION", ""), "")


MEMO_SLACK = 1_000  # label dicts remembered beyond twice the samples of the current scrape


class DcgmMapper:
    """Turns parsed dcgm-exporter families into a Snapshot of infrapulse_gpu_* families.

    After each `map`: `coverage` is {DCGM field: series it yields} (expected fields included,
    0 when absent or all blank), `unmapped` {field: samples no family takes}, `blanks` the
    sentinel values dropped."""

    def __init__(self, hostname: str = "", on_foreign_host: Callable[[str], None] | None = None) -> None:
        self.hostname = hostname
        self.on_foreign_host = on_foreign_host
        self.blanks = 0
        self.coverage: dict[str, int] = {}
        self.unmapped: dict[str, Unmapped] = {}
        self._memo: dict[int, _Series] = {}

    def _series(self, labels: dict[str, str]) -> _Series:
        series = self._memo.get(id(labels))
        if series is None or series.labels is not labels:
            series = self._memo[id(labels)] = _Series(labels)
        return series

    def map(self, families: dict[str, MetricFamily]) -> Snapshot:
        snap = Snapshot()
        self.blanks = 0
        self.unmapped = {}
        produced: dict[str, set[tuple[str, SeriesKey]]] = {f: set() for f in EXPECTED_FIELDS}
        fb_parts: dict[SeriesKey, dict[str, float]] = {}
        copies: dict[tuple[str, SeriesKey], _Copy] = {}
        if len(self._memo) > 2 * sum(len(family.samples) for family in families.values()) + MEMO_SLACK:
            self._memo.clear()  # label dicts not shared across scrapes must not pile up
        mig_gpus = {(s.labels.get("gpu"), _uuid(s.labels)) for family in families.values()
                    for s in family.samples if s.name.startswith("DCGM_") and s.labels.get("GPU_I_ID")}
        for family in families.values():
            micro = "(in us)" in family.help  # older counters files: violation times in microseconds
            for sample in family.samples:
                name, labels, value = sample.name, sample.labels, sample.value
                if not name.startswith("DCGM_"):
                    continue
                produced.setdefault(name, set())
                series = self._series(labels)
                gpu = series.gpu
                if gpu is None:  # NVSwitch / CPU entities: no GPU family to put them in
                    self._unmapped(name, labels)
                    continue
                uuid, instance, optional = series.uuid, series.instance, series.optional
                on_mig = (gpu, uuid) in mig_gpus
                self._check_host(labels)
                self._info(snap, series.identity, optional, on_mig)
                mapping = FIELD_MAP.get(name)
                if name in CLOCK_REASON_FIELDS:
                    if value >= 0 and not is_blank(value, False):  # -Inf would break int()
                        self._clock_events(snap, produced, copies, name, gpu, uuid, int(value), optional,
                                           on_mig)
                    else:
                        self.blanks += 1
                    continue
                if mapping is None and name not in _FB_PARTS:
                    self._unmapped(name, labels)
                    continue
                if is_blank(value, mapping.floating if mapping else False):
                    self.blanks += 1
                    continue
                if instance and name in MIG_UNSUPPORTED:
                    self._unmapped(name, labels)
                    continue
                if on_mig and name not in PER_INSTANCE_FIELDS:
                    if mapping is not None:
                        self._offer(copies, mapping, name, (gpu, uuid) + mapping.extra + fam.NO_OPTIONAL,
                                    _instance_rank(instance), value * _scale(mapping, micro))
                    continue
                if name in _FB_PARTS:
                    fb_parts.setdefault((gpu, uuid) + optional, {})[name] = value
                if mapping is not None:
                    key = (gpu, uuid) + mapping.extra + optional
                    snap.add(mapping.family, key, value * _scale(mapping, micro))
                    produced[name].add((mapping.family.name, key))
        for (family_name, key), copy in copies.items():
            if family_name == _CLOCK_EVENTS:
                self._clock_events(snap, produced, {}, copy.field, key[0], key[1], int(copy.value),
                                   fam.NO_OPTIONAL, False)
            else:
                snap.add(family_name, key, copy.value)
                produced[copy.field].add((family_name, key))
        self._totals(snap, fb_parts, produced)
        self.coverage = {f: len(keys) for f, keys in produced.items()}
        return snap

    @staticmethod
    def _offer(copies: dict[tuple[str, SeriesKey], _Copy], mapping: Mapping, field: str, key: SeriesKey,
               rank: float, value: float) -> None:
        """Keep one copy of a physical field of a MIG GPU. Counters: the largest copy (the newest
        reading of a monotonic counter, so the exported counter never steps back when instances
        are read in a different order); gauges: the copy of the lowest GPU_I_ID (any copy is a valid
        reading a moment apart; the lowest id keeps the choice stable between scrapes)."""
        slot = (mapping.family.name, key)
        current = copies.get(slot)
        if mapping.family.type == catalog.COUNTER:
            better = current is None or value > current.value
        else:
            better = current is None or rank < current.rank
        if better:
            copies[slot] = _Copy(field, rank, value)

    @staticmethod
    def _clock_events(snap: Snapshot, produced: dict[str, set[tuple[str, SeriesKey]]],
                      copies: dict[tuple[str, SeriesKey], _Copy], field: str, gpu: str, uuid: str, mask: int,
                      optional: tuple[str, ...], on_mig: bool) -> None:
        if on_mig:  # physical: the lowest GPU_I_ID's mask, written once the whole scrape is read
            slot, rank = (_CLOCK_EVENTS, (gpu, uuid)), _instance_rank(optional[0])
            current = copies.get(slot)
            if current is None or rank < current.rank:
                copies[slot] = _Copy(field, rank, float(mask))
            return
        fam.add_clock_events(snap, gpu, uuid, mask, fam.ALL_CLOCK_EVENT_BITS, optional)
        produced[field] |= {(fam.CLOCK_EVENT.name, (gpu, uuid, reason) + optional)
                            for _, reason in fam.CLOCK_EVENT_REASONS}

    def _unmapped(self, field: str, labels: dict[str, str]) -> None:
        entry = self.unmapped.get(field)
        if entry is None:
            text = ",".join(f'{k}="{v}"' for k, v in labels.items())
            self.unmapped[field] = Unmapped(1, f"{field}{{{text}}}")
        else:
            entry.samples += 1

    def _totals(self, snap: Snapshot, fb_parts: dict[SeriesKey, dict[str, float]],
                produced: dict[str, set[tuple[str, SeriesKey]]]) -> None:
        # dcgm-exporter's default set has free/used/reserved but no total: total is their sum.
        totals = snap.series.get(fam.MEMORY_TOTAL.name, {})
        for key, parts in fb_parts.items():
            if key in totals or "DCGM_FI_DEV_FB_FREE" not in parts or "DCGM_FI_DEV_FB_USED" not in parts:
                continue
            snap.add(fam.MEMORY_TOTAL, key, sum(parts.values()) * MIB)
            produced["DCGM_FI_DEV_FB_FREE"].add((fam.MEMORY_TOTAL.name, key))

    def _info(self, snap: Snapshot, identity: SeriesKey, optional: tuple[str, ...], on_mig: bool) -> None:
        info = snap.series.setdefault(fam.INFO.name, {})
        # One row per physical GPU, and one per MIG instance (as the nvml source writes them).
        keys = [identity + ("", "", "")] if on_mig else []
        for key in keys + [identity + (optional[0], optional[1], "")]:
            if key not in info:
                info[key] = 1.0

    def _check_host(self, labels: dict[str, str]) -> None:
        host = labels.get("hostname") or labels.get("Hostname")
        if host and self.hostname and host != self.hostname and self.on_foreign_host is not None:
            self.on_foreign_host(host)


@settings("Read a dcgm-exporter /metrics endpoint and map DCGM_FI_* fields into the infrapulse_gpu_* "
          "families (units converted, DCGM no-data sentinels dropped).")
@dataclass(kw_only=True, slots=True)
class DcgmSettings(PollingSettings):
    enabled: bool = setting(Bool("Scrape dcgm-exporter.", default=False))
    url: str = setting(Str("dcgm-exporter's metrics URL.", default="http://127.0.0.1:9400/metrics"))
    interval: float | None = setting(Duration("Scrape interval; defaults to the global interval.", min=0.1))
    timeout: float = setting(Duration("HTTP timeout of one scrape (capped below the interval).", default="4s",
                                      min=0.05))
    max_bytes: int = setting(Int("Largest response body accepted.", default=16 << 20, min=1024))
    ca_file: str = setting(Str("CA bundle for an https url (dcgm-exporter --web-config-file TLS).",
                               default=""))
    bearer_token_file: str = setting(Str("File holding a bearer token sent with each scrape (re-read on "
                                         "change).", default=""))
    owns: list[str] = setting(ListOf(
        "Family-name patterns (fnmatch) taken from DCGM when the nvml source also runs on the "
        "node; nvml leaves these out and provides every other family. When nvml is not "
        "running (disabled, or no NVML library) dcgm provides every family it maps.",
        item=Str(), default=list(fam.DEFAULT_DCGM_OWNS)))
    max_series: int = setting(Int("Most series this source may export (after ownership); new series past it "
                                  "are dropped and counted in infrapulse_source_series_dropped_total.",
                                  default=20_000, min=1))




class DcgmSource(PollingSource[DcgmSettings]):
    name = "dcgm"
    role = "node"
    CONFIG = DcgmSettings.SCHEMA

    def __init__(self, config: DcgmSettings, ctx: SourceContext) -> None:
        super().__init__(config, ctx)
        self.scraper = Scraper()
        self.mapper = DcgmMapper(ctx.hostname, self._foreign_host)
        self._foreign_logged: set[str] = set()
        self.budget = SeriesBudget(config.max_series)
        fam.ownership(self.store).dcgm_patterns = tuple(config.owns)

    def _foreign_host(self, host: str) -> None:
        if host not in self._foreign_logged:
            self._foreign_logged.add(host)
            self.log.warning("dcgm-exporter reports another host; is the url pointing at this node?",
                             extra={"dcgm_host": host, "this_host": self.ctx.hostname})

    def _target(self) -> ScrapeTarget:
        timeout = min(self.config.timeout, self.interval * self.timeout_fraction * 0.9)
        return ScrapeTarget(url=self.config.url, timeout=timeout, max_bytes=self.config.max_bytes,
                            ca_file=self.config.ca_file,
                            bearer_token_file=self.config.bearer_token_file)

    async def collect(self) -> list[TargetResult]:
        # Retries (transient resets) only while they still fit in this poll's time budget.
        deadline = asyncio.get_running_loop().time() + self.interval * self.timeout_fraction * 0.95
        try:
            result = await self.scraper.scrape(self._target(), deadline)
        except ScrapeError as exc:
            return [TargetResult(TARGET, reason=exc.reason, message=exc.message)]
        snap = self.mapper.map(result.families)
        # What each DCGM field yields before ownership hands families to nvml (they still map).
        self.store.set_coverage(self.name, TARGET, self.mapper.coverage)
        for field, unmapped in self.mapper.unmapped.items():
            self.store.count_unmapped(self.name, TARGET, field, unmapped.example, unmapped.samples)
        ownership = fam.ownership(self.store)
        ownership.filter(snap, ownership.dcgm_exports)
        dropped = self.budget.apply(snap)
        if not dropped:
            return [TargetResult(TARGET, snap)]
        self.store.count_dropped_series(self.name, TARGET, dropped)
        return [TargetResult(TARGET, snap, partial_errors=[SeriesBudget.message(dropped, self.budget.limit)])]

    def default_target(self) -> str:
        return TARGET

    async def close(self) -> None:
        fam.ownership(self.store).dcgm_patterns = None
        await self.scraper.close()


SOURCE = DcgmSource
