"""The journal: one SQLite file recording every run, attempt, measurement and accepted graph.

    runs          one optimization: its key (graph hash, device, proposers, rules), budget, baseline and
                  best time with their evidence, stop reason; `finished` is NULL while it runs or after a
                  crash (that is what `optimize` resumes)
    attempts      one proposal: proposer, region (key, input types, attrs), kernel id and version, its
                  source (kernel source text, or the library module for a library kernel), the params
                  swept and chosen, the verdict and its reason, the kernel's time and evidence, the best
                  finalist's time and evidence, kept or not and why; `finished` once decided
    measurements  every measurement the run made or reused (kind "kernel", "graph", or "graph in turn": a
                  close call's timings, never read back), its key, seconds, samples, evidence, method,
                  `fresh`: 1 when timed now, 0 when read back)
    graphs        each accepted graph as a `.hoid` document, with its unified diff against the previous best

Every write is its own transaction, committed before the loop goes on: a `kill -9` loses at most the
attempt in flight. A finished whole-graph measurement is looked up here by the graph's hash before
anything is timed again (kernel measurements live in `hoid.measure`'s cache), so a resumed run repeats
none. The default path is `HOID_JOURNAL`, else `~/.cache/hoid/journal.sqlite`.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from ..ir.text import dumps

SCHEMA = ("""
create table if not exists runs (
    id integer primary key, key text not null, graph text not null, device text not null, agents text not null,
    budget text not null, started real not null, finished real, stop_reason text,
    baseline_s real, baseline_evidence text, best_s real, best_evidence text)""", """
create table if not exists attempts (
    id integer primary key, run integer not null references runs(id), seq integer not null, key text not null,
    proposer text not null, region text not null, types text not null, attrs text not null,
    kernel text not null, version text not null, source text, sweep text not null, params text,
    verdict text, verdict_reason text, kernel_s real, kernel_evidence text, kernel_method text,
    graph_s real, graph_evidence text, kept integer not null default 0, why text, finished integer not null default 0,
    at real not null, note text, unique (run, key))""", """
create table if not exists measurements (
    id integer primary key, run integer not null, kind text not null, key text not null, seconds real not null,
    samples text, evidence text not null, method text not null, fresh integer not null, at real not null)""", """
create table if not exists graphs (
    id integer primary key, run integer not null, attempt integer, hash text not null, document text not null,
    diff text not null, seconds real not null, evidence text not null, at real not null)""")


def default_journal_path() -> Path:
    return Path(os.environ.get("HOID_JOURNAL") or Path.home() / ".cache" / "hoid" / "journal.sqlite")


def graph_hash(graph) -> str:
    return hashlib.sha256(dumps(graph).encode()).hexdigest()[:16]


def _json(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


@dataclass(frozen=True)
class AttemptRow:
    """A finished attempt as the journal holds it (what resume replays)."""

    id: int
    key: str
    verdict: str
    verdict_reason: str
    params: dict | None
    kernel_s: float | None
    kernel_evidence: str | None
    graph_s: float | None
    graph_evidence: str | None
    kept: bool
    why: str


class Journal:
    """A journal file (see the module doc). One writer per run; use as a context manager or `close()`."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else default_journal_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self.db.execute("pragma journal_mode=wal")
        self.db.execute("pragma synchronous=full")  # a committed attempt survives kill -9 and power loss
        for statement in SCHEMA:
            self.db.execute(statement)
        columns = {row[1] for row in self.db.execute("pragma table_info(attempts)")}
        if "note" not in columns:  # a journal written before attempts carried their proposer's note
            self.db.execute("alter table attempts add column note text")

    # --- runs ------------------------------------------------------------------------------------
    def open_run(self, key: str, graph: str, device: str, agents: str, budget: str) -> tuple[int, bool]:
        """The unfinished run of `key` to resume, or a new one: (run id, resumed)."""
        row = self.db.execute("select id from runs where key = ? and finished is null order by id desc limit 1",
                              (key,)).fetchone()
        if row is not None:
            return row[0], True
        cur = self.db.execute("insert into runs (key, graph, device, agents, budget, started) values (?,?,?,?,?,?)",
                              (key, graph, device, agents, budget, time.time()))
        return cur.lastrowid, False

    def set_baseline(self, run: int, seconds: float, evidence: str) -> None:
        self.db.execute("update runs set baseline_s = ?, baseline_evidence = ?, best_s = coalesce(best_s, ?), "
                        "best_evidence = coalesce(best_evidence, ?) where id = ?",
                        (seconds, evidence, seconds, evidence, run))

    def finish_run(self, run: int, stop_reason: str, best_s: float, best_evidence: str, *, resumable: bool) -> None:
        """Record why the run stopped; an interrupted run stays resumable (finished left NULL)."""
        self.db.execute("update runs set stop_reason = ?, best_s = ?, best_evidence = ?, finished = ? where id = ?",
                        (stop_reason, best_s, best_evidence, None if resumable else time.time(), run))

    def run_row(self, run: int) -> dict:
        cur = self.db.execute("select * from runs where id = ?", (run,))
        names = [d[0] for d in cur.description]
        return dict(zip(names, cur.fetchone(), strict=True))

    # --- attempts --------------------------------------------------------------------------------
    def finished_attempt(self, run: int, key: str) -> AttemptRow | None:
        row = self.db.execute("select id, key, verdict, verdict_reason, params, kernel_s, kernel_evidence, graph_s, "
                              "graph_evidence, kept, why from attempts where run = ? and key = ? and finished = 1",
                              (run, key)).fetchone()
        if row is None:
            return None
        return AttemptRow(row[0], row[1], row[2] or "", row[3] or "", json.loads(row[4]) if row[4] else None,
                          row[5], row[6], row[7], row[8], bool(row[9]), row[10] or "")

    def begin_attempt(self, run: int, key: str, proposer: str, region, kernel, sweep, source: str | None,
                      note: str = "") -> int:
        """Record an attempt as started (an unfinished one from a crash is started over); `note`: the
        proposer's why (an LLM's hypothesis)."""
        self.db.execute("delete from attempts where run = ? and key = ? and finished = 0", (run, key))
        seq = self.db.execute("select count(*) from attempts where run = ?", (run,)).fetchone()[0]
        cur = self.db.execute(
            "insert into attempts (run, seq, key, proposer, region, types, attrs, kernel, version, source, sweep, at, "
            "note) values (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (run, seq, key, proposer, region.key, _json([str(t) for t in region.types]), _json(region.attrs),
             kernel.id, kernel.version, source, _json(list(sweep)), time.time(), note or None))
        return cur.lastrowid

    def record_failure(self, run: int, proposer: str, what: str, why: str, verdict: str = "failed") -> int:
        """A failed attempt that never reached a check (an LLM's malformed answer, a source that cannot be
        loaded): finished at once, never kept, keyed by its position so that each one is its own row."""
        seq = self.db.execute("select count(*) from attempts where run = ?", (run,)).fetchone()[0]
        cur = self.db.execute(
            "insert into attempts (run, seq, key, proposer, region, types, attrs, kernel, version, sweep, verdict, "
            "verdict_reason, why, finished, at) values (?,?,?,?,?,?,?,?,?,?,?,?,?,1,?)",
            (run, seq, f"{proposer}|failure|{seq}|{time.time()}", proposer, "-", "[]", "{}", what, "-", "[]",
             verdict, why, why, time.time()))
        return cur.lastrowid

    def update_attempt(self, attempt: int, **fields) -> None:
        if "params" in fields and fields["params"] is not None:
            fields["params"] = _json(fields["params"])
        if "kept" in fields:
            fields["kept"] = int(bool(fields["kept"]))
        names = ", ".join(f"{k} = ?" for k in fields)
        self.db.execute(f"update attempts set {names} where id = ?", (*fields.values(), attempt))

    def attempts(self, run: int | None = None) -> list[dict]:
        """Every attempt (of one run), in order, as dicts of the columns."""
        where, args = ("where run = ?", (run,)) if run is not None else ("", ())
        cur = self.db.execute(f"select * from attempts {where} order by run, seq", args)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    # --- measurements ----------------------------------------------------------------------------
    def record_measurement(self, run: int, kind: str, key: str, seconds: float, samples, evidence: str,
                           method: str, *, fresh: bool) -> None:
        self.db.execute("insert into measurements (run, kind, key, seconds, samples, evidence, method, fresh, at) "
                        "values (?,?,?,?,?,?,?,?,?)",
                        (run, kind, key, seconds, _json(list(samples) if samples else []), evidence, method,
                         int(fresh), time.time()))

    def graph_measurement(self, key: str) -> tuple[float, list[float], str, str] | None:
        """A whole-graph measurement made before under `key` (any run): seconds, samples, evidence, method."""
        row = self.db.execute("select seconds, samples, evidence, method from measurements where kind = 'graph' "
                              "and key = ? and fresh = 1 order by id limit 1", (key,)).fetchone()
        return (row[0], json.loads(row[1] or "[]"), row[2], row[3]) if row else None

    def measurements(self, run: int | None = None, *, fresh: bool | None = None) -> list[dict]:
        clauses, args = [], []
        if run is not None:
            clauses.append("run = ?")
            args.append(run)
        if fresh is not None:
            clauses.append("fresh = ?")
            args.append(int(fresh))
        where = f"where {' and '.join(clauses)}" if clauses else ""
        cur = self.db.execute(f"select * from measurements {where} order by id", args)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    # --- accepted graphs -------------------------------------------------------------------------
    def record_graph(self, run: int, attempt: int | None, graph, previous, seconds: float, evidence: str) -> None:
        """An accepted graph as a document, with its diff against the previous best."""
        text = dumps(graph)
        diff = "".join(difflib.unified_diff(dumps(previous).splitlines(keepends=True), text.splitlines(keepends=True),
                                            "previous.hoid", "accepted.hoid")) if previous is not None else ""
        self.db.execute("insert into graphs (run, attempt, hash, document, diff, seconds, evidence, at) "
                        "values (?,?,?,?,?,?,?,?)",
                        (run, attempt, graph_hash(graph), text, diff, seconds, evidence, time.time()))

    def best_graph(self, run: int) -> tuple[str, float, str] | None:
        """The last accepted graph of `run`: (document, seconds, evidence)."""
        row = self.db.execute("select document, seconds, evidence from graphs where run = ? order by id desc limit 1",
                              (run,)).fetchone()
        return tuple(row) if row else None

    def graphs(self, run: int) -> list[dict]:
        cur = self.db.execute("select * from graphs where run = ? order by id", (run,))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def source_text(spec) -> str:
    """What the journal keeps of a candidate's code: its source, or the library module it lives in."""
    source = getattr(spec.launch, "source", None)
    return source.text if source is not None else f"library: {getattr(spec.launch, '__module__', '?')}"
