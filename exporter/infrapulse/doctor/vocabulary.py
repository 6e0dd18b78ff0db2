"""One vocabulary for what goes wrong and what to do about it: every doctor FAIL / warn row gets
the `fix` of the first entry here that matches its check area and detail; the quickstarts'
troubleshooting tables (docs/quickstart-node.md, docs/quickstart-switch.md) show the same row
and fix words for the entries they list (`doc`), and tests/test_doctor_vocabulary.py holds both
to it. `check-config` and doctor name a source that cannot run on this host with the same words
(`NOT_ON_THIS_HOST` and the source's own `unavailable` reason).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NOT_ON_THIS_HOST = "enabled but not on this host"
PROFILE_PLACEHOLDER = "{the profile it names}"
NODE_DOC, SWITCH_DOC = "docs/quickstart-node.md", "docs/quickstart-switch.md"


@dataclass(frozen=True)
class Entry:
    kind: str  # a stable name: area.condition
    area: str  # the check column ("*": any)
    pattern: str  # searched in the detail
    fix: str
    row: str = ""  # how the row reads in its quickstart table (first column), when `doc` lists it
    doc: str = ""

    def matches(self, area: str, detail: str) -> bool:
        return self.area in ("*", area) and re.search(self.pattern, detail) is not None


ENTRIES: tuple[Entry, ...] = (
    # -- the config and the files it names ---------------------------------------------------
    Entry("config.invalid", "config", "",
          "correct this key in the config (docs/configuration.md lists every key)"),
    Entry("web_config.invalid", "web config", "", "correct the web config (docs/security.md)"),
    Entry("env.unset", "env", "is not set", "set the variable in the daemon's environment "
          "(systemd: Environment= or EnvironmentFile=)"),
    Entry("file.missing", "file", "does not exist$", "create it, or correct the path in the config"),
    Entry("file.no_certificate", "file", "no PEM certificate", "point the key at a PEM file "
          "(-----BEGIN CERTIFICATE-----), not a DER or key file"),
    Entry("file.no_key", "file", "no PEM private key", "point key_file at the PEM private key"),
    Entry("file.empty", "file", "empty$", "write the secret into the file (one line)"),
    Entry("file.unreadable", "file", "", "check the path and that the user infrapulse runs as may read it"),
    # -- node sources ------------------------------------------------------------------------
    Entry("nvml.no_nvml", "nvml", "NVML does not load here|^no_nvml",
          "the driver's `libnvidia-ml.so.1` is not on the library path (in a container: the NVIDIA runtime "
          "with `NVIDIA_DRIVER_CAPABILITIES=utility`)",
          f"nvml - FAIL {NOT_ON_THIS_HOST}: NVML does not load here ...", NODE_DOC),
    Entry("source.not_here", "*", f"^{NOT_ON_THIS_HOST}: ",
          "run infrapulse on the host this source is meant for, or set `enabled: false` "
          "(`enabled: auto` leaves it off by itself)",
          f"<source> - FAIL {NOT_ON_THIS_HOST}: ...", NODE_DOC),
    Entry("nvml.no_gpu", "nvml", "sees no GPU", "the GPUs are not visible here: `nvidia-smi -L` lists none "
          "(in a container: `NVIDIA_VISIBLE_DEVICES=all`)",
          "nvml nvml FAIL NVML loads (driver ...) but sees no GPU", NODE_DOC),
    Entry("nvml.error", "nvml", "", "see the reason: docs/gpu.md explains each NVML error"),
    Entry("infiniband.no_device", "infiniband", "^no RDMA device found",
          "no `/sys/class/infiniband/mlx5_*`: is the mlx5_ib module loaded? In a container, mount the host's "
          "`/sys` and set `sysfs_root`",
          "infiniband - FAIL no RDMA device found with this config", NODE_DOC),
    Entry("ethtool.netdev", "ethtool", "",
          "the netdev is in another network namespace: run on the host network",
          "ethtool ens1f0np0 FAIL ...", NODE_DOC),
    Entry("serving.refused", "serving", "connection_refused",
          "the engine is not running, or serves its metrics on another port",
          "serving vllm FAIL connection_refused: ...", NODE_DOC),
    Entry("serving.error", "serving", "",
          "check the endpoint's url: the engine's Prometheus page (docs/serving.md)"),
    # -- gNMI ----------------------------------------------------------------------------------
    Entry("gnmi.unauthenticated", "gnmi", r"\bunauthenticated\b",
          "user name or password wrong (the password itself is never shown)", "unauthenticated", SWITCH_DOC),
    Entry("gnmi.files", "gnmi", r"\bcannot read |^credentials: ",
          "the `file` or `env` row of that key says what is wrong with it (step 2)",
          "tls: cannot read tls.ca_file ...", SWITCH_DOC),
    Entry("gnmi.tls", "gnmi", r"\btls: ", "wrong `ca_file`, or `server_name` is not the name in the switch "
          "certificate; a plaintext gNMI port needs `insecure: true`",
          "tls: TLS handshake failed ...", SWITCH_DOC),
    Entry("gnmi.encoding", "gnmi", r"\bencoding: ", "the profile does not fit this NOS (step 3)",
          "encoding: the switch supports ...; profile ... needs one of ...", SWITCH_DOC),
    Entry("gnmi.profile", "gnmi", r"^profile \S+: \d+ of \d+ mappings answered .*; \S+ answers",
          f"set profile: {PROFILE_PLACEHOLDER} for this target",
          "profile ...: 0 of ... mappings answered a Get; ... answers ... of ...", SWITCH_DOC),
    Entry("gnmi.no_profile", "gnmi", r"^profile \S+: \d+ of \d+ mappings answered",
          "no shipped profile reads this switch: write one for its paths (profiles_dir, docs/gnmi.md)",
          "profile ...: 0 of ... mappings answered a Get; no known profile answers either", SWITCH_DOC),
    Entry("gnmi.unreachable", "gnmi", r"\b(unavailable|timeout)\b",
          "address, port, a firewall, or gNMI is not enabled on the switch",
          "unavailable / timeout", SWITCH_DOC),
    Entry("gnmi.no_capabilities", "gnmi", "has no Capabilities",
          "nothing if its streams come up: `infrapulse run` and step 7 show the switch's series",
          "answers but has no Capabilities ...", SWITCH_DOC),
    Entry("gnmi.rejected", "gnmi", r"\brejected\b", "the switch refuses a path or mode of the profile: "
          "override the profile (profiles_dir, docs/gnmi.md)"),
    Entry("gnmi.no_targets", "gnmi", "no targets configured",
          "add targets (or a targets_file) under sources.gnmi"),
    Entry("gnmi.config", "gnmi", "", "correct the file or setting it names (docs/gnmi.md); "
          "`infrapulse check-config` lists every problem"),
    # -- any source ----------------------------------------------------------------------------
    Entry("source.error", "*", "", "the reason comes from the source itself: its page in docs/ explains it "
          "(docs/README.md lists them)"),
)


def entry_for(area: str, detail: str) -> Entry:
    """The first entry matching a row (the catch-all `source.error` matches any)."""
    return next(e for e in ENTRIES if e.matches(area, detail))


def fix_for(area: str, detail: str, profile: str = "") -> str:
    fix = entry_for(area, detail).fix
    return fix.replace(PROFILE_PLACEHOLDER, profile) if profile else fix
