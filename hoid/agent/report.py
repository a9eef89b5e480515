"""`Report`: what a run tried, what it kept and why, and how much faster, every figure labelled.

A gain is called a *speedup* only when both times were measured on the device; a modelled gain is
reported as a modelled gain, never as a speedup.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..measure.timing import format_seconds


@dataclass
class Report:
    graph: str
    device: str
    baseline_s: float
    baseline_evidence: str
    best_s: float
    best_evidence: str
    stop_reason: str
    journal: str
    run: int
    resumed: bool = False
    attempts: list[dict] = field(default_factory=list)  # journal rows of this run
    kept: list[str] = field(default_factory=list)  # "kernel at region (evidence)"
    reused: list[str] = field(default_factory=list)  # persisted acceptances used without a new attempt
    stale: list[str] = field(default_factory=list)  # persisted acceptances checked again, and why

    @property
    def measured(self) -> bool:
        return self.baseline_evidence == "measured" and self.best_evidence == "measured"

    @property
    def gain(self) -> float:
        return self.baseline_s / self.best_s if self.best_s > 0 else float("inf")

    def headline(self) -> str:
        if self.measured:
            return (f"speedup {self.gain:.3f}x (measured): {format_seconds(self.baseline_s)} -> "
                    f"{format_seconds(self.best_s)} on {self.device}")
        return (f"modelled gain {self.gain:.3f}x (modelled, not a speedup): {format_seconds(self.baseline_s)} "
                f"({self.baseline_evidence}) -> {format_seconds(self.best_s)} ({self.best_evidence}) on {self.device}")

    def __str__(self) -> str:
        lines = [f"# hoid optimize: {self.graph} on {self.device}", "", self.headline(),
                 f"stopped: {self.stop_reason}{' (resumed run)' if self.resumed else ''}",
                 f"journal: {self.journal} (run {self.run})", ""]
        tried = len(self.attempts)
        kept = sum(1 for a in self.attempts if a["kept"])
        lines.append(f"## attempts: {tried}, kept {kept}")
        for a in self.attempts:
            mark = "kept" if a["kept"] else "-"
            t = f"{format_seconds(a['kernel_s'])} ({a['kernel_evidence']})" if a["kernel_s"] else ""
            lines.append(f"- [{mark}] {a['proposer']}: {a['kernel']} for {a['region']}: {a['verdict'] or '?'} "
                         f"{t}; {a['why'] or ''}".rstrip())
        if self.kept:
            lines += ["", "## kernels in the best graph"] + [f"- {k}" for k in self.kept]
        if self.reused:
            lines += ["", "## reused (accepted with measured evidence earlier)"] + [f"- {k}" for k in self.reused]
        if self.stale:
            lines += ["", "## checked again (their kernel changed)"] + [f"- {k}" for k in self.stale]
        if not self.measured:
            lines += ["", "Kernels accepted on modelled evidence are provisional: not stored for the device; "
                      "run on the device to measure them."]
        return "\n".join(lines)
