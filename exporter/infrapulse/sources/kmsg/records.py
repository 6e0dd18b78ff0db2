"""One kernel log line -> (priority, sequence, message), whatever wrote it.

Forms (as in /work/shared/real/kmsg): raw /dev/kmsg records `6,3964,206764307,-;msg` (the only
form with a sequence number), `[ 12345.678901] msg` (dmesg), `[Sun Feb 23 16:24:18 2025] msg`
(dmesg --ctime), `kern  :warn  : 2025-...+00:00 msg` (dmesg --decode --time-format iso, the only
text form with a priority), journal `Feb 14 05:03:41 host kernel: msg` (any month name, e.g.
Russian), `kernel: msg`, a pdsh `host: ` prefix before any of these, and no prefix at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

LEVELS = {"emerg": 0, "alert": 1, "crit": 2, "err": 3, "warn": 4, "notice": 5, "info": 6, "debug": 7}

_RAW = re.compile(r"^(\d+),(\d+),(\d+),[^;]*;(.*)$", re.S)
_DMESG = re.compile(r"^\[\s*\d+\.\d+\]\s?(.*)$", re.S)
_CTIME = re.compile(r"^\[\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\]\s?(.*)$", re.S)
_ISO = re.compile(r"^(\w+)\s*:(\w+)\s*: \d{4}-\d\d-\d\dT[\d:,.]+[+-]\d\d:?\d\d\s?(.*)$", re.S)
# Journal: a month name (any language: \w+ is Unicode), day, time, an optional host, `kernel:`.
_JOURNAL = re.compile(r"^\w+\.? +\d{1,2} \d\d:\d\d:\d\d (?:\S+ )?kernel: ?(.*)$", re.S)
_KERNEL = re.compile(r"^kernel: ?(.*)$", re.S)
_OTHER_DAEMON = re.compile(r"^\w+\.? +\d{1,2} \d\d:\d\d:\d\d \S+ [^\s:]+(?:\[\d+\])?: ")
# pdsh/clush: `host: ` before a stamped line (only taken when a stamp follows).
_PDSH = re.compile(r"^[\w.-]+: (?=\[)")
# Indented text with no stamp under a stamped line: the kernel's continuation of that record.
_CONTINUATION = re.compile(r"^\s{4,}\S")


@dataclass(frozen=True)
class Record:
    priority: int | None  # syslog level 0..7 when the form carries it
    seq: int | None  # /dev/kmsg sequence number (raw records only)
    message: str
    kernel: bool = True  # False for another daemon's journal line (systemd[1]: ...)
    stamped: bool = True  # the line had a recognised prefix


def unescape(text: str) -> str:
    r"""/dev/kmsg writes non-printable bytes as \xNN (a newline inside a record is \x0a)."""
    if "\\x" not in text:
        return text
    return re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), text)


def parse(line: str) -> Record:
    """One line (without its newline) in any form above."""
    line = line.rstrip("\r\n")
    m = _RAW.match(line)
    if m:
        return Record(int(m.group(1)) & 7, int(m.group(2)), unescape(m.group(4)))
    m = _ISO.match(line)
    if m and m.group(2) in LEVELS:
        return Record(LEVELS[m.group(2)], None, m.group(3))
    body = _PDSH.sub("", line, count=1)
    for form in (_DMESG, _CTIME, _JOURNAL, _KERNEL):
        m = form.match(body)
        if m:
            return Record(None, None, m.group(1))
    if _OTHER_DAEMON.match(line):
        return Record(None, None, line, kernel=False)
    return Record(None, None, line.strip(), stamped=False)


def continues(record: Record, line: str) -> bool:
    """Whether `line` is the continuation of `record` (indented, no stamp, under a stamped line)."""
    return record.stamped and bool(_CONTINUATION.match(line)) and not parse(line).stamped


def fold(record: Record, line: str) -> Record:
    return Record(record.priority, record.seq, record.message + "\n" + line.strip(), record.kernel)


def parse_lines(lines: Iterable[str]) -> list[Record]:
    """Lines of a text log: continuation lines (indented, no stamp) are folded into the record
    above them with a newline, as /dev/kmsg keeps them in one record."""
    out: list[Record] = []
    for line in lines:
        if not line.strip():
            continue
        if out and continues(out[-1], line):
            out[-1] = fold(out[-1], line)
        else:
            out.append(parse(line))
    return out
