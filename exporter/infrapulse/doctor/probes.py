"""One real look at each enabled source, on this host, with the config's own settings.

Node sources that poll (infiniband, ethtool, dcgm, and any later one) run one collection into a
throwaway store: the same code the daemon runs, so "found" here means the daemon finds it too.
NVML is opened and closed; each gNMI target is dialled and asked for Capabilities, which must
offer an encoding its profile speaks, then for one Get per mapping of its profile (`fit`: which
profile fits); each serving endpoint is scraped once and its engine named. A source whose
`unavailable` names a reason gets that reason, in check-config's words, instead of a probe.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2 as pb
from pygnmi.spec.v080 import gnmi_pb2_grpc as pb_grpc

from ..config import Config
from ..scrape import redact_url
from ..sources import specs
from ..sources.base import PollingSource, Source, SourceContext
from ..sources.gnmi import shard as shard_mod
from ..sources.gnmi.channel import open_channel, read_credentials
from ..sources.gnmi.config import (
    GnmiSettings,
    SwitchSettings,
    TargetsFileError,
    merge_target,
    read_targets_file,
)
from ..sources.gnmi.profile import Profile, ProfileError, load_profiles
from ..sources.gnmi.session import SessionError, choose_encoding, classify
from ..sources.gpu.nvml import OPEN_FAKE_KEY, NvmlSettings
from ..sources.gpu.nvml_api import InitError, NvmlApi, RealNvml
from ..sources.serving.source import Endpoint, ServingSource
from ..sources.spec import SourceSpec
from ..store import Store
from . import fit as fit_mod
from .report import FAIL, OK, SKIP, WARN, Check
from .vocabulary import NOT_ON_THIS_HOST, fix_for

SourceOptions = dict[str, Any]


def _context(cfg: Config, options: SourceOptions) -> SourceContext:
    return SourceContext(store=Store(), interval=cfg.interval, options=options)


async def _close(source: Source[Any]) -> None:
    closing = source.close()
    if inspect.isawaitable(closing):
        await closing


def _status_checks(name: str, store: Store, describe: Callable[[str], str]) -> list[Check]:
    """One row per target the source reported: ok/partial with what it found, or why it failed."""
    out = []
    for (source, target), st in sorted(store.status.items()):
        if source != name:
            continue
        if not st.up:
            out.append(Check(name, target, FAIL, f"{st.reason}: {st.message}"))
            continue
        found = describe(target)
        if st.partial_errors:
            out.append(Check(name, target, WARN, f"{found}; partial: {st.partial_errors[0]}"
                                                 + (f" (+{len(st.partial_errors) - 1} more)"
                                                    if len(st.partial_errors) > 1 else "")))
        else:
            out.append(Check(name, target, OK, found))
    return out


# -- polling node sources ------------------------------------------------------------------------

PORT_STATES = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}


def _describe_rdma(store: Store) -> Callable[[str], str]:
    def describe(device: str) -> str:
        snap = store.snapshot("infiniband", device)
        if snap is None:
            return "no data"
        info = snap.series.get("infrapulse_rdma_port_info", {})
        states = snap.series.get("infrapulse_rdma_port_state", {})
        ports = []
        for labels in sorted(info):
            _, port, layer, netdev = labels
            state = next((PORT_STATES.get(int(v), f"state {v:g}") for k, v in states.items()
                          if k[:2] == labels[:2] and isinstance(v, (int, float))), "")
            kind = "RoCE" if layer == "Ethernet" else layer or "?"
            via = f" -> {netdev}" if netdev else ""
            ports.append(f"port {port} {kind}{via}" + (f" ({state})" if state else ""))
        return "; ".join(ports) or f"{len(snap)} series"
    return describe


def _describe_ethtool(store: Store) -> Callable[[str], str]:
    def describe(interface: str) -> str:
        snap = store.snapshot("ethtool", interface)
        if snap is None:
            return "no data"
        stats = snap.series.get("infrapulse_nic_driver_stats", {})
        count = next(iter(stats.values()), None)
        mapped = sum(1 for fam, series in snap.series.items()
                     if series and fam.startswith("infrapulse_nic_") and fam != "infrapulse_nic_driver_stats")
        driver = f"{count:g} driver statistics, " if isinstance(count, (int, float)) else ""
        return f"{driver}{mapped} infrapulse_nic_* families"
    return describe


def _describe_series(store: Store, name: str) -> Callable[[str], str]:
    def describe(target: str) -> str:
        snap = store.snapshot(name, target)
        return f"{len(snap) if snap is not None else 0} series"
    return describe


async def probe_polling(name: str, cls: type[PollingSource[Any]], cfg: Config,
                        options: SourceOptions) -> list[Check]:
    ctx = _context(cfg, options)
    source = cls(cfg.sources[name], ctx)
    try:
        await source.poll_once()
    finally:
        await _close(source)
    describe = {"infiniband": _describe_rdma, "ethtool": _describe_ethtool}.get(name)
    describer = describe(ctx.store) if describe else _describe_series(ctx.store, name)
    checks = _status_checks(name, ctx.store, describer)
    if not checks:
        what = {"infiniband": "no RDMA device", "ethtool": "no network interface"}.get(name, "no target")
        checks = [Check(name, "-", FAIL, f"{what} found with this config")]
    return checks


# -- NVML -----------------------------------------------------------------------------------------

def probe_nvml(section: NvmlSettings, options: SourceOptions) -> list[Check]:
    api: NvmlApi
    if section.fake:
        opener = options.get(OPEN_FAKE_KEY)
        if opener is None:
            return [Check("nvml", "nvml", FAIL, "sources.nvml.fake is set but no NVML fake was given")]
        api = opener(section.fake)
        fake = f" (NVML fake: {section.fake})"
    else:
        api = RealNvml()
        fake = ""
    try:
        api.init()
    except InitError as exc:
        result = WARN if section.enabled == "auto" and exc.reason == "no_nvml" else FAIL
        off = "; enabled: auto leaves the source off" if result == WARN else ""
        return [Check("nvml", "nvml", result, f"{exc.reason}: NVML does not load here ({exc.message}){off}")]
    try:
        count = api.device_count()
        names = [api.name(api.handle_by_index(i)) for i in range(count)]
        driver = api.driver_version()
    finally:
        api.shutdown()
    if not count:
        return [Check("nvml", "nvml", FAIL, f"NVML loads (driver {driver}) but sees no GPU{fake}")]
    models = ", ".join(f"{names.count(n)}x {n}" for n in dict.fromkeys(names))
    return [Check("nvml", "nvml", OK, f"NVML loads: driver {driver}, {count} GPU(s): {models}{fake}")]


# -- gNMI -----------------------------------------------------------------------------------------

def gnmi_targets(section: GnmiSettings) -> tuple[list[SwitchSettings], list[Check]]:
    """Every configured switch with its effective settings, and problems reading targets_file."""
    targets = list(section.targets)
    problems = []
    if section.targets_file:
        try:
            targets += read_targets_file(section.targets_file)
        except TargetsFileError as exc:
            problems.append(Check("gnmi", "targets_file", FAIL, str(exc)))
    return [merge_target(section.defaults, t) for t in targets], problems


async def probe_gnmi_target(conn: SwitchSettings, profile: Profile,
                            profiles: dict[str, Profile] | None = None) -> Check:
    """Capabilities (encodings, models) against the profile, then one Get per mapping of it (and,
    when it answers few, of every other profile: which one fits)."""
    name = conn.name
    creds = None
    try:
        creds = read_credentials(conn)
        channel = open_channel(conn)
    except Exception as exc:  # ChannelSetupError: unreadable credentials or TLS files
        reason, message = classify(exc)
        return Check("gnmi", name, FAIL, f"{reason}: {message}")
    secrets = (creds.password,) if creds.password else ()
    try:
        stub = pb_grpc.gNMIStub(channel)
        try:
            caps = await stub.Capabilities(pb.CapabilityRequest(), metadata=creds.metadata(),
                                           timeout=conn.connect_timeout)
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            guess = f"profile {profile.name} will try {profile.encodings[0]}"
            return Check("gnmi", name, WARN, f"{conn.address}: answers but has no Capabilities; {guess}")
        supported = list(caps.supported_encodings)
        offered = ", ".join(pb.Encoding.Name(e) for e in supported) or "none announced"
        encoding = choose_encoding(supported, profile, conn.encoding)
        transport = "plaintext" if conn.insecure else "TLS"
        announced = {m.name for m in caps.supported_models}
        asker = fit_mod.Asker(stub, creds.metadata(), conn.connect_timeout)
        mine = await fit_mod.fit(asker, profile, supported, announced, conn.encoding, name)
        others: list[fit_mod.Fit] = []
        if mine.answered < mine.mappings:
            others = [await fit_mod.fit(asker, p, supported, announced, name=name)
                      for p in (profiles or {}).values() if p.name != profile.name]
        return _fit_check(conn, profile, mine, others, asker.via,
                          f"{conn.address} ({transport}): gNMI {caps.gNMI_version or '?'}, "
                          f"encodings {offered}; profile {profile.name} will use {encoding}")
    except (SessionError, grpc.aio.AioRpcError, OSError) as exc:
        reason, message = classify(exc, secrets)
        return Check("gnmi", name, FAIL, f"{conn.address}: {reason}: {message}")
    finally:
        await channel.close(grace=None)


def _fit_check(conn: SwitchSettings, profile: Profile, mine: fit_mod.Fit, others: list[fit_mod.Fit],
               via: str, head: str) -> Check:
    """The row: the configured profile fails when it maps nothing, or under half of its mappings
    while another profile answers more; the best-fitting ones are named with their counts."""
    models = (f"; Capabilities announce none of {', '.join(mine.missing_models)}"
              if mine.missing_models else "")
    answered = f"{mine.answered} of {mine.mappings} mappings answered {via}"
    better = [f for f in fit_mod.best(others) if f.answered > mine.answered]
    few = mine.answered == 0 or (better and mine.answered * 2 < mine.mappings)
    if not few:
        note = f"; {better[0].answers()}" if better else ""
        return Check("gnmi", conn.name, OK, f"{head}; {answered}{models}{note}")
    fitting = better[:3]
    if not fitting:
        return Check("gnmi", conn.name, FAIL,
                     f"profile {profile.name}: {answered}{models}; no known profile answers either")
    rest = [f"{f.profile} {f.answered} of {f.mappings}" for f in fitting[1:]]
    named = ", ".join([fitting[0].answers(), *rest])
    detail = f"profile {profile.name}: {answered}{models}; {named}"
    return Check("gnmi", conn.name, FAIL, detail, fix_for("gnmi", detail, fitting[0].profile))


async def probe_gnmi(section: GnmiSettings, hostname: str) -> list[Check]:
    try:
        profiles = load_profiles(section.profiles_dir)
    except ProfileError as exc:
        return [Check("gnmi", "profiles_dir", FAIL, str(exc))]
    conns, checks = gnmi_targets(section)
    try:
        shard = shard_mod.resolve(section.shard, os.environ, hostname)
    except shard_mod.ShardError as exc:
        return [*checks, Check("gnmi", "shard", FAIL, str(exc))]
    owned = [c for c in conns if shard.owns(c.name)]
    checks += [Check("gnmi", c.name, SKIP, f"owned by another shard (this instance is {shard})")
               for c in conns if not shard.owns(c.name)]
    results = await asyncio.gather(*(probe_gnmi_target(c, profiles[c.profile], profiles) for c in owned))
    if not conns:
        checks.append(Check("gnmi", "-", FAIL, "no targets configured"))
    return checks + list(results)


# -- serving --------------------------------------------------------------------------------------

async def probe_serving(cfg: Config) -> list[Check]:
    ctx = _context(cfg, {})
    source = ServingSource(cfg.sources["serving"], ctx)
    try:
        await asyncio.gather(*(source.poll_endpoint(ep) for ep in source.endpoints))
    finally:
        await source.close()
    by_name: dict[str, Endpoint] = {ep.name: ep for ep in source.endpoints}

    def describe(name: str) -> str:
        snap = ctx.store.snapshot("serving", name)
        series = snap.series if snap is not None else {}
        up = series.get("infrapulse_llm_endpoint_up", {})
        engine = next((labels[1] for labels, v in up.items() if v == 1.0), "?")
        families = sum(1 for fam, s in series.items() if s and fam.startswith("infrapulse_llm_"))
        url = redact_url(by_name[name].target.url)
        return f"{url}: engine {engine}, {families} infrapulse_llm_* families"

    return _status_checks("serving", ctx.store, describe)


# -- all ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ProbeRequest:
    """What a source's doctor probe (its spec's `doctor`) is given."""

    name: str
    cls: type[Source[Any]]
    cfg: Config
    options: SourceOptions
    hostname: str


Probe = Callable[[ProbeRequest], Awaitable[list[Check]]]


async def nvml(req: ProbeRequest) -> list[Check]:
    return await asyncio.to_thread(probe_nvml, req.cfg.sources[req.name], req.options)


async def gnmi(req: ProbeRequest) -> list[Check]:
    return await probe_gnmi(req.cfg.sources[req.name], req.hostname)


async def serving(req: ProbeRequest) -> list[Check]:
    return await probe_serving(req.cfg)


async def polling(req: ProbeRequest) -> list[Check]:
    assert issubclass(req.cls, PollingSource)
    return await probe_polling(req.name, req.cls, req.cfg, req.options)


def probe_of(spec: SourceSpec) -> Probe | None:
    """The spec's own probe ("module:function" under infrapulse.doctor), else the generic one
    for a polling source; None when there is none."""
    if spec.doctor:
        module, _, function = spec.doctor.partition(":")
        found: Probe = getattr(importlib.import_module(f"{__package__}.{module}"), function)
        return found
    return polling if issubclass(spec.source, PollingSource) else None


async def probe_all(cfg: Config, options: SourceOptions, hostname: str) -> list[Check]:
    """Rows for every source: probed when the config enables it, else `skip` with why."""
    checks: list[Check] = []
    for name, spec in specs().items():
        section = cfg.sources[name]
        if not spec.source.wanted(section):
            checks.append(Check(name, "-", SKIP, spec.source.not_wanted(section)))
            continue
        why = spec.source.unavailable(section)
        if why:  # check-config says the same: "<NOT_ON_THIS_HOST>: <name> (<why>)"
            result = WARN if section.enabled == "auto" else FAIL
            checks.append(Check(name, "-", result, f"{NOT_ON_THIS_HOST}: {why}"))
            continue
        probe = probe_of(spec)
        if probe is None:
            checks.append(Check(name, "-", SKIP, "no probe for this source yet"))
            continue
        checks += await probe(ProbeRequest(name, spec.source, cfg, options, hostname))
    return checks
