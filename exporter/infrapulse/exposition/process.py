"""The process_* families of prometheus_client's ProcessCollector, counting open descriptors cheaply.

prometheus_client counts open descriptors with `len(os.listdir("/proc/<pid>/fd"))` on every
scrape. A node daemon keeps hundreds of sysfs counters open (the infiniband reader preads them),
and that listing was ~10 % of the daemon's CPU per scrape. Since Linux 6.2, stat() of that
directory reports the number of open descriptors as its size, in ~2 µs. prometheus_client's
listing holds one descriptor of its own open while it counts, so the same figure is size + 1.
Whether the size means that is checked against a listing when the collector starts; where it
does not (an older kernel, a test's fake /proc), every scrape lists the directory as before.
/proc/<pid>/stat and limits are read through descriptors kept open (two more in the count).
The families, their help and values are otherwise prometheus_client's, so the bytes are too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from prometheus_client import ProcessCollector
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric


class FastProcessCollector(ProcessCollector):
    """ProcessCollector(registry=None) whose open-descriptor count comes from stat() where it can."""

    def __init__(self, proc: str = "/proc") -> None:
        super().__init__(proc=proc, registry=None)
        self._dir = os.path.join(proc, str(self._pid()).strip())
        self._size_counts_fds = self._check_fd_size()
        self._fds: dict[str, int] = {}  # name -> descriptor of /proc/<pid>/<name>

    def _check_fd_size(self) -> bool:
        """stat()'s size of the fd directory + 1 == prometheus_client's count, on 3 tries (another
        thread may open or close a descriptor between the two calls)."""
        fd_dir = os.path.join(self._dir, "fd")
        for _ in range(3):
            try:
                if os.stat(fd_dir).st_size + 1 == len(os.listdir(fd_dir)):
                    return True
            except OSError:
                return False
        return False

    def _read(self, name: str) -> bytes:
        """A /proc file of the process, read again through a descriptor kept open (a pread at 0
        makes procfs write it anew: no open and close per scrape)."""
        fd = self._fds.get(name)
        if fd is None:
            fd = self._fds[name] = os.open(os.path.join(self._dir, name), os.O_RDONLY | os.O_CLOEXEC)
        chunks = [os.pread(fd, 65536, 0)]
        while len(chunks[-1]) == 65536:  # (never for stat or limits)
            chunks.append(os.pread(fd, 65536, 65536 * len(chunks)))
        return b"".join(chunks)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}

    def open_fds(self) -> int:
        fd_dir = os.path.join(self._dir, "fd")
        if self._size_counts_fds:
            return os.stat(fd_dir).st_size + 1
        return len(os.listdir(fd_dir))

    def values(self) -> list[tuple[str, float]]:
        """(sample name, value) of each family collect() yields, in its order (the counter's
        sample is process_cpu_seconds_total): what a render writes through the shape kept for
        each name (registry.UnlabelledMetrics)."""
        if not self._btime:
            return []
        result: list[tuple[str, float]] = []
        prefix, ticks = self._prefix, self._ticks
        try:
            fields = self._read("stat").split(b")")[-1].split()  # after the command name
            result += [(prefix + "virtual_memory_bytes", float(fields[20])),
                       (prefix + "resident_memory_bytes", float(fields[21]) * self._pagesize),
                       (prefix + "start_time_seconds", float(fields[19]) / ticks + self._btime),
                       (prefix + "cpu_seconds_total", float(fields[11]) / ticks + float(fields[12]) / ticks)]
        except OSError:
            pass
        try:
            limits = self._read("limits").splitlines()
            max_fds = next((line for line in limits if line.startswith(b"Max open file")), None)
            if max_fds is None:  # (prometheus_client fails the scrape here)
                return result
            result += [(prefix + "open_fds", float(self.open_fds())),
                       (prefix + "max_fds", float(max_fds.split()[3]))]
        except OSError:
            pass
        return result

    def metric(self, name: str, value: float) -> Metric:
        """The family of values()'s sample `name` as prometheus_client's ProcessCollector yields it."""
        help_text = _HELP[name[len(self._prefix):]]
        if name.endswith("_total"):
            return CounterMetricFamily(name[: -len("_total")], help_text, value=value)
        return GaugeMetricFamily(name, help_text, value=value)

    def collect(self) -> Iterable[Metric]:
        return [self.metric(name, value) for name, value in self.values()]


# process_* family help, by name after the prefix (prometheus_client's ProcessCollector)
_HELP = {
    "virtual_memory_bytes": "Virtual memory size in bytes.",
    "resident_memory_bytes": "Resident memory size in bytes.",
    "start_time_seconds": "Start time of the process since unix epoch in seconds.",
    "cpu_seconds_total": "Total user and system CPU time spent in seconds.",
    "open_fds": "Number of open file descriptors.",
    "max_fds": "Maximum number of open file descriptors.",
}
