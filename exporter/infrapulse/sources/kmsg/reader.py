"""Reading and following the kernel log, with a cursor that survives restarts.

/dev/kmsg (a character device) gives one record per read(2): EAGAIN means caught up, EPIPE means
the ring buffer overwrote records we had not read yet (counted as an overrun; the next read
returns the oldest record still there). Any other path (a regular file of records or log lines,
a FIFO) is read as lines and followed like `tail -f`: tests and the demo use it.

The cursor (`<state_dir>/kmsg/cursor.json`: the last sequence number and the boot it belongs to)
makes a restart skip what was already counted (seq <= cursor). A different boot id, or a
sequence that goes backwards, means a new log: the cursor starts over.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from .records import Record, continues, fold, parse

READ_SIZE = 8192  # a /dev/kmsg record is at most ~8 KiB (PRINTK_MESSAGE_MAX + header)


@dataclass
class Batch:
    records: list[Record] = field(default_factory=list)
    overruns: int = 0  # EPIPE: records lost to the ring buffer
    skipped: int = 0  # records at or below the cursor (already counted before a restart)
    restarts: int = 0  # the cursor started over (reboot or a rewritten log)


class Unreadable(Exception):
    """The log cannot be opened or read; the message names the path."""


class KmsgReader:
    def __init__(self, path: str, cursor_file: Path | None, boot_id: str = "") -> None:
        self.path = path
        self.cursor_file = cursor_file
        self.boot_id = boot_id
        self.cursor = self._load_cursor()
        self._saved = self.cursor
        self._fd: int | None = None
        self._device = False
        self._buffer = b""
        self._pending: deque[str] = deque()
        self._error: Unreadable | None = None
        self._last_seq: int | None = None

    # -- cursor ----------------------------------------------------------------------------

    def _load_cursor(self) -> int:
        if self.cursor_file is None:
            return -1
        try:
            data = json.loads(self.cursor_file.read_text())
        except (OSError, ValueError):
            return -1
        if not isinstance(data, dict) or data.get("boot_id", "") != self.boot_id:
            return -1  # another boot: its sequence numbers mean nothing here
        seq = data.get("seq")
        return seq if isinstance(seq, int) else -1

    def save_cursor(self) -> None:
        if self.cursor_file is None or self.cursor == self._saved:
            return
        self.cursor_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.cursor_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"seq": self.cursor, "boot_id": self.boot_id}))
        os.replace(tmp, self.cursor_file)  # atomic: a crash leaves the old cursor or the new one
        self._saved = self.cursor

    # -- reading ---------------------------------------------------------------------------

    def open(self) -> None:
        if self._fd is not None:
            return
        try:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise Unreadable(f"cannot open {self.path}: {exc.strerror}") from exc
        self._device = stat.S_ISCHR(os.fstat(self._fd).st_mode)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def read(self, limit: int) -> Batch:
        """Up to `limit` new records (those past the cursor)."""
        if self._error is not None:  # a read failed after records were taken: report it now
            error, self._error = self._error, None
            raise error
        self.open()
        batch = Batch()
        while len(batch.records) < limit:
            try:
                record = self._next(batch)
            except Unreadable as exc:
                if not batch.records:
                    raise
                self._error = exc  # keep what was read (the cursor already covers it)
                break
            if record is None:
                break
            if record.seq is not None:
                if self._last_seq is not None and record.seq < self._last_seq:
                    self.cursor = -1  # the log started over under us
                    batch.restarts += 1
                self._last_seq = record.seq
                if record.seq <= self.cursor:
                    batch.skipped += 1
                    continue
                self.cursor = record.seq
            batch.records.append(record)
        return batch

    def _next(self, batch: Batch) -> Record | None:
        assert self._fd is not None
        if self._device:
            while True:
                try:
                    data = os.read(self._fd, READ_SIZE)
                except BlockingIOError:
                    return None  # EAGAIN: caught up
                except OSError as exc:
                    if exc.errno == errno.EPIPE:
                        batch.overruns += 1
                        continue
                    if exc.errno == errno.EINVAL:  # a record longer than READ_SIZE: skip it
                        continue
                    raise Unreadable(f"cannot read {self.path}: {exc.strerror}") from exc
                if not data:
                    return None
                return parse(data.decode("utf-8", "replace"))
        while not self._pending:
            try:
                data = os.read(self._fd, READ_SIZE * 8)
            except BlockingIOError:
                data = b""
            except OSError as exc:
                raise Unreadable(f"cannot read {self.path}: {exc.strerror}") from exc
            if not data:
                # At EOF a last line without a newline is complete (the raw capture ends so).
                if self._buffer:
                    self._pending.append(self._buffer.decode("utf-8", "replace"))
                    self._buffer = b""
                    break
                return None
            *lines, self._buffer = (self._buffer + data).split(b"\n")
            self._pending.extend(line.decode("utf-8", "replace") for line in lines)
        return self._take_line()

    def _take_line(self) -> Record | None:
        # A record and the continuation lines after it (records.parse_lines); blank lines are none.
        while self._pending:
            line = self._pending.popleft()
            if not line.strip():
                continue
            record = parse(line)
            while self._pending and continues(record, self._pending[0]):
                record = fold(record, self._pending.popleft())
            return record
        return None
