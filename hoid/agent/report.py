"""`Report`: what a run tried, what it kept and why, and how much faster, every figure labelled.

A gain is called a *speedup* only when both times were measured on the device; a modelled gain is
reported as a modelled gain, never as a speedup.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..measure.timing import format_seconds


@dataclass
class Report:
    """What one optimize run did: baseline and best whole-graph time with their evidence, why it stopped,
    the attempts checked, kept, reused and skipped (`hoid report` prints it)."""
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
    attempts: list[dict] = field(default_factory=list)  # journal rows of this run that were checked
    kept: list[str] = field(default_factory=list)  # "kernel at region (evidence)"
    reused: list[str] = field(default_factory=list)  # persisted acceptances used without a new attempt
    stale: list[str] = field(default_factory=list)  # persisted acceptances checked again, and why
    skipped: list[dict] = field(default_factory=list)  # rows a proposer left unproposed, with the reason
    unreached: list[str] = field(default_factory=list)  # what the run's end left untried, by proposer

    def __post_init__(self):
        # a skip is journaled as a finished row (so resume does not ask again) but it is not an attempt:
        # nothing was checked and it spent no budget
        self.skipped = self.skipped + [a for a in self.attempts if a["verdict"] == "skipped"]
        self.attempts = [a for a in self.attempts if a["verdict"] != "skipped"]

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
            where = f" for {a['region']}" if a["region"] != "-" else ""  # "-": a failure that reached no region
            lines.append(f"- [{mark}] {a['proposer']}: {a['kernel']}{where}: {a['verdict'] or '?'} "
                         f"{t}; {a['why'] or ''}".rstrip())
            note = a.get("note") or ""
            if note.startswith("hypothesis:"):  # an LLM's, stated before it proposed (hoid/agent/openai_proposer.py)
                lines.append(f"  - {' '.join(note.split())[:600]}")
        if self.unreached:
            lines += ["", "## not reached (the run ended first)"] + [f"- {u}" for u in self.unreached]
        if self.skipped:
            lines += ["", f"## skipped: {len(self.skipped)} (not proposed, nothing checked)"]
            lines += [f"- {a['proposer']}: {a['region']}: {a['why']}" for a in self.skipped]
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


def report_from_journal(journal, run: int | None = None) -> Report:
    """The `Report` of run `run` of `journal` (a `Journal`; default: its last run), read back from the file:
    what `hoid report` prints for a run that has ended, or one still going."""
    import json

    from ..ir.text import loads

    if run is None:
        row = journal.db.execute("select max(id) from runs").fetchone()
        if row is None or row[0] is None:
            raise LookupError("the journal holds no run yet")
        run = row[0]
    found = journal.db.execute("select id from runs where id = ?", (run,)).fetchone()
    if found is None:
        raise LookupError(f"no run {run} in the journal")
    r = journal.run_row(run)
    kept = []
    best = journal.best_graph(run)
    if best is not None:
        kept = sorted({f"{n.attrs['kernel']} {json.dumps(n.attrs['params'], sort_keys=True)}"
                       for n in loads(best[0]).nodes if n.op == "kernel"})
    baseline = r["baseline_s"] or 0.0
    return Report(r["graph"], r["device"], baseline, r["baseline_evidence"] or "modelled",
                  r["best_s"] or baseline, r["best_evidence"] or r["baseline_evidence"] or "modelled",
                  r["stop_reason"] or ("running, or crashed: resumable" if r["finished"] is None else "?"),
                  str(journal.path), run, False, journal.attempts(run), kept)


def best_over_attempts(report: Report) -> list[tuple[int, float, bool]]:
    """(attempt number, the best whole-graph time after it, kept at it) from the baseline (attempt 0) on."""
    best = report.baseline_s
    points = [(0, best, False)]
    for i, a in enumerate(report.attempts, 1):
        kept = bool(a["kept"]) and a["graph_s"] is not None
        if kept:
            best = min(best, a["graph_s"])
        points.append((i, best, kept))
    return points


def plot_best(report: Report, path) -> None:
    """A PNG at `path`: the best whole-graph latency over attempts, kept attempts marked, evidence labelled."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a GPU machine or in CI
    import matplotlib.pyplot as plt

    points = best_over_attempts(report)
    xs, ys = [p[0] for p in points], [p[1] * 1e6 for p in points]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.step(xs, ys, where="post", label="best so far")
    ax.scatter([p[0] for p in points if p[2]], [p[1] * 1e6 for p in points if p[2]], color="tab:green",
               zorder=3, label="kept")
    ax.set_xlabel("attempt")
    ax.set_ylabel(f"whole graph (µs, {report.best_evidence})")
    ax.set_title(f"{report.graph} on {report.device}: {report.gain:.3f}x "
                 f"({'measured' if report.measured else 'modelled'})")
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
