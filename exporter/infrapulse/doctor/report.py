"""One row per check and the table `infrapulse doctor` prints."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .vocabulary import fix_for

OK, WARN, FAIL, SKIP = "ok", "warn", "FAIL", "skip"


@dataclass(frozen=True)
class Check:
    """The outcome of one check: `area` (config, file, a source name), what was checked, the
    result (ok, warn, FAIL, skip), a sentence, and for a FAIL or warn what to do about it (`fix`,
    from the vocabulary the quickstarts' tables share); never a secret."""

    area: str
    target: str
    result: str
    detail: str = ""
    fix: str = ""

    def as_json(self) -> dict[str, str]:
        out = {"check": self.area, "target": self.target, "result": self.result, "detail": self.detail}
        if self.fix:
            out["fix"] = self.fix
        return out

    def line(self) -> str:
        """The detail with its fix, as the table prints it."""
        return f"{self.detail} — fix: {self.fix}" if self.fix else self.detail


def with_fix(check: Check) -> Check:
    """A FAIL or warn row with its vocabulary fix (rows that carry one keep it)."""
    if check.result not in (FAIL, WARN) or check.fix:
        return check
    return replace(check, fix=fix_for(check.area, check.detail))


def table(checks: list[Check]) -> str:
    header = ["check", "target", "result", "detail"]
    rows = [[c.area, c.target, c.result, c.line()] for c in checks]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]

    def line(row: list[str]) -> str:
        return "  ".join([*(cell.ljust(w) for cell, w in zip(row[:3], widths)), row[3]]).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths] + ["-" * 6]), *(line(r) for r in rows)])


def summary(checks: list[Check]) -> str:
    failed = sum(c.result == FAIL for c in checks)
    warned = sum(c.result == WARN for c in checks)
    if not failed and not warned:
        return f"doctor: all {len(checks)} checks passed"
    return (f"doctor: {failed} problem{'s' * (failed != 1)}, {warned} warning{'s' * (warned != 1)} "
            f"in {len(checks)} checks")
