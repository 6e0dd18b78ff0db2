"""atheris harness: gNMI decoding (Notification protos, TypedValues, JSON / JSON_IETF, path strings).

    python fuzz/fuzz_gnmi.py -max_total_time=600 [CORPUS_DIR ...]
    python fuzz/fuzz_gnmi.py --write-seeds DIR   # a starting corpus from the built-in profiles

The first byte picks what the rest is:
  0  a serialized Notification, applied to one SwitchState per built-in profile (the states live
     across inputs, so bindings, caches, deletes and sweeps see sequences, as on a real stream);
  1  a serialized TypedValue, decoded as the ingest path does (scalar / load_json, to_number);
  2  JSON bytes sent as json_ietf_val at a profile's container subscription path;
  3  a path string: parse_path, to_proto, PathPattern, and format_path -> parse_path round trip.
Contract: decoded values or MalformedValue / PathSyntaxError / protobuf DecodeError, and
SwitchState.apply never raises (bad values are counted in infrapulse_switch_malformed_updates_total).
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris
from google.protobuf.message import DecodeError

with atheris.instrument_imports(include=["infrapulse"]):
    from pygnmi.spec.v080 import gnmi_pb2 as pb

    from infrapulse.sources.gnmi.ingest import SwitchState
    from infrapulse.sources.gnmi.paths import PathPattern, PathSyntaxError, format_path, parse_path, to_proto
    from infrapulse.sources.gnmi.profile import load_profiles
    from infrapulse.sources.gnmi.values import JSON_FIELDS, MalformedValue, load_json, scalar, to_number

PROFILES = load_profiles()
STATES: dict[str, SwitchState] = {}
SUB_PATHS = [(name, sub.path) for name, profile in sorted(PROFILES.items())
             for stream in profile.streams for sub in stream.subscriptions]


def _state(name: str) -> SwitchState:
    state = STATES.get(name)
    if state is None or state.series_count() > 50_000:  # start afresh now and then: bounded memory
        state = STATES[name] = SwitchState("fuzz", PROFILES[name])
        state.begin_session()
    return state


def _apply(name: str, notification: pb.Notification) -> None:
    state = _state(name)
    before = state.updates
    state.apply(notification)
    assert state.updates == before + len(notification.update)
    if notification.timestamp % 7 == 0:  # exercise the life-cycle paths too
        state.sweep()
        state.on_sync()


def test_one_input(data: bytes) -> None:
    if not data:
        return
    mode, body = data[0] % 4, data[1:]
    if mode == 0:
        try:
            notification = pb.Notification.FromString(body)
        except DecodeError:
            return
        for name in PROFILES:
            _apply(name, notification)
    elif mode == 1:
        try:
            tv = pb.TypedValue.FromString(body)
        except DecodeError:
            return
        which = tv.WhichOneof("value")
        try:
            to_number(load_json(getattr(tv, which)) if which in JSON_FIELDS else scalar(tv, which))
        except MalformedValue:
            pass
    elif mode == 2:
        fdp = atheris.FuzzedDataProvider(body)
        name, path = fdp.PickValueInList(SUB_PATHS)
        value = pb.TypedValue(json_ietf_val=fdp.ConsumeBytes(fdp.remaining_bytes()))
        update = pb.Update(path=to_proto(path.replace("*", "Ethernet0")), val=value)
        _apply(name, pb.Notification(update=[update]))
    else:
        text = body.decode("utf-8", "replace")
        try:
            elems = parse_path(text)
            proto = to_proto(text)
        except PathSyntaxError:
            return
        assert [e.name for e in proto.elem] == [name for name, _ in elems]
        canonical = tuple((name, tuple(sorted(keys.items()))) for name, keys in elems)
        # Key *names* are never escaped by format_path (YANG identifiers need no escaping), and
        # parse_path strips the whole text, so edge whitespace in the first/last name is not kept.
        formatted = format_path(canonical)
        plain_keys = all(not set(k) & set("[]=\\") for _, keys in canonical for k, _ in keys)
        if formatted == formatted.strip() and plain_keys:
            again = parse_path(formatted)
            assert [(n, tuple(sorted(k.items()))) for n, k in again] == list(canonical), (text, again)
        try:
            PathPattern(text)
        except PathSyntaxError:
            pass


def write_seeds(directory: Path) -> None:
    """Mode-tagged seeds: a PROTO update and a JSON subtree per profile subscription, paths, values."""
    directory.mkdir(parents=True, exist_ok=True)
    seeds: list[bytes] = []
    for _profile, path in SUB_PATHS:
        concrete = path.replace("*", "Ethernet0")
        n = pb.Notification(prefix=to_proto(concrete), timestamp=1,
                            update=[pb.Update(path=pb.Path(elem=[pb.PathElem(name="in-octets")]),
                                              val=pb.TypedValue(uint_val=12))])
        seeds.append(b"\0" + n.SerializeToString())
        seeds.append(b"\3" + concrete.encode())
    for doc in (b'{"counters": {"in-octets": "12", "out-octets": 3}}', b'{"Ethernet0": "7"}',
                b'{"queue": [{"name": "3", "state": {"transmit-pkts": "5"}}]}',
                b'{"Ethernet0:3": {"SAI_QUEUE_STAT_PACKETS": "9"}}'):
        seeds.append(b"\2\0" + doc)
    for tv in (pb.TypedValue(decimal_val=pb.Decimal64(digits=1234, precision=2)),
               pb.TypedValue(string_val="UP"),
               pb.TypedValue(leaflist_val=pb.ScalarArray(element=[pb.TypedValue(int_val=-1)]))):
        seeds.append(b"\1" + tv.SerializeToString())
    for i, seed in enumerate(seeds):
        (directory / f"seed-{i:03d}").write_bytes(seed)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--write-seeds":
        write_seeds(Path(sys.argv[2]))
        return
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
