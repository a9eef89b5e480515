"""The measurement cache: SQLite, keyed by device, kernel id and version, params, input types and attrs,
and the Triton and torch versions installed when it was measured.

Hours of search survive a restart, and a second model reuses what the first measured. The file is plain
SQLite in WAL mode, safe for several processes writing at once (each write is one short transaction that
waits for the lock). To carry results to or from the GPU machine, `snapshot()` the cache into a single
file (consistent even while others write; or `close()` it, which checkpoints the WAL into its file), copy
that file, and `merge()` it into the cache on the other side: the newer measurement of a key wins.

A measurement never outlives what it measured: the kernel version covers its code and helpers
(`hoid.kernels.version`), the key the compiler and runtime under it. A lookup that misses where a row
exists under another of those versions is no plain miss: `explain_miss(key)` says what changed, and the
callers that report misses (the search's measured costs, tuning) say it too.

Files keep their schema version in `PRAGMA user_version`. A file of schema 0 (before the key held the
Triton and torch versions) is migrated when opened, and taken as such by `merge()`: its rows get the
versions "unknown", which no installation has, so they are kept (as a record) but never used.

The path is `HOID_CACHE` if set, else `~/.cache/hoid/measure.sqlite`.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import sqlite3
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..ir import TensorType
from .timing import Timing

_KEY = ("device", "kernel", "version", "params", "types", "attrs", "triton", "torch")
_VERSIONS = ("version", "triton", "torch")  # what a row was measured under, beside what it measured
_CHOICE_KEY = tuple(k for k in _KEY if k != "params")  # a tuned choice is per signature: params are its value
SCHEMA_VERSION = 1
UNKNOWN = "unknown"  # the Triton and torch versions of a row from schema 0, which did not record them
_SCHEMA = ("""
CREATE TABLE IF NOT EXISTS measurements (
    device TEXT NOT NULL, kernel TEXT NOT NULL, version TEXT NOT NULL, triton TEXT NOT NULL, torch TEXT NOT NULL,
    params TEXT NOT NULL, types TEXT NOT NULL, attrs TEXT NOT NULL,
    median REAL NOT NULL, spread REAL NOT NULL, runs INTEGER NOT NULL, method TEXT NOT NULL,
    floor REAL, measured_at REAL NOT NULL,
    PRIMARY KEY (device, kernel, version, triton, torch, params, types, attrs))""", """
CREATE TABLE IF NOT EXISTS choices (
    device TEXT NOT NULL, kernel TEXT NOT NULL, version TEXT NOT NULL, triton TEXT NOT NULL, torch TEXT NOT NULL,
    params TEXT NOT NULL, types TEXT NOT NULL, attrs TEXT NOT NULL, median REAL NOT NULL, tried INTEGER NOT NULL,
    measured_at REAL NOT NULL,
    PRIMARY KEY (device, kernel, version, triton, torch, types, attrs))""")
_TABLES = ("measurements", "choices")
_MEASUREMENT_COLUMNS = _KEY + ("median", "spread", "runs", "method", "floor", "measured_at")
_CHOICE_COLUMNS = _KEY + ("median", "tried", "measured_at")


@functools.cache
def installed_versions() -> tuple[str, str]:
    """(Triton, torch) versions of this process: the imported module's, else the installed distribution's
    (without importing it), else "none"."""
    def version(module: str, distributions: tuple[str, ...]) -> str:
        if module in sys.modules and getattr(sys.modules[module], "__version__", None):
            return str(sys.modules[module].__version__)
        for name in distributions:
            try:
                return importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                pass
        return "none"

    return version("triton", ("triton", "pytorch-triton", "pytorch-triton-rocm")), version("torch", ("torch",))


def default_cache_path() -> Path:
    """Where measurements are kept: `HOID_CACHE`, else ~/.cache/hoid/measure.sqlite."""
    return Path(os.environ.get("HOID_CACHE") or Path.home() / ".cache" / "hoid" / "measure.sqlite")


def _canonical(value) -> str:
    """JSON with sorted keys: equal dicts give equal text (floats keep their exact repr)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class MeasureKey:
    """What a measurement is of. Build one with `MeasureKey.of(...)`, which canonicalizes the parts."""

    device: str
    kernel: str
    version: str
    params: str
    types: str
    attrs: str
    triton: str
    torch: str

    @classmethod
    def of(cls, device: str, kernel: str, version: str, params: dict, types: Sequence[TensorType],
           attrs: dict | None = None, *, triton: str | None = None, torch: str | None = None) -> MeasureKey:
        """`triton`, `torch`: the versions measured under; default those installed here."""
        installed = installed_versions()
        return cls(device, kernel, version, _canonical(params), ";".join(str(t) for t in types),
                   _canonical(attrs or {}), triton or installed[0], torch or installed[1])

    def row(self) -> tuple:
        return tuple(getattr(self, k) for k in _KEY)


@dataclass(frozen=True)
class Entry:
    """A cached measurement: seconds per run (median), its interquartile spread, how it was taken, and the
    analytic floor at the time (for the kernel's efficiency, floor / median), if the caller gave one."""

    key: MeasureKey
    median: float
    spread: float
    runs: int
    method: str
    floor: float | None
    measured_at: float

    @property
    def efficiency(self) -> float | None:
        return self.floor / self.median if self.floor and self.median > 0 else None


@dataclass(frozen=True)
class Choice:
    """A tuned parameter choice: the params that won, their median time, how many candidates were tried."""

    key: MeasureKey
    params: dict
    median: float
    tried: int
    measured_at: float


class MeasureCache:
    """A measurement cache file. Use as a context manager, or `close()` it when done."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we open our own transactions (BEGIN IMMEDIATE takes the write lock up
        # front, so two writers never deadlock upgrading a read lock); timeout: wait for the lock.
        self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA busy_timeout=60000")
            with self._write():
                self._migrate()
        except sqlite3.DatabaseError as e:
            self._db.close()
            raise ValueError(f"{self.path} is not a usable hoid measurement cache ({e}); "
                             "delete it or point HOID_CACHE elsewhere") from None

    # --- transactions and schema ---------------------------------------------------------------------
    def _write(self):
        return _Transaction(self._db)

    def _migrate(self) -> None:
        """Bring the file to `SCHEMA_VERSION` (inside the caller's write transaction)."""
        found = self._db.execute("PRAGMA user_version").fetchone()[0]
        if found > SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f"schema {found}, written by a newer hoid than this one "
                                        f"(schema {SCHEMA_VERSION})")
        old = {table: _columns(self._db, "main", table) for table in _TABLES}
        for table in _TABLES:  # schema 0 lacks triton and torch, which SQLite cannot add to a primary key
            if old[table] and "triton" not in old[table]:
                self._db.execute(f"ALTER TABLE {table} RENAME TO {table}_schema0")
        for statement in _SCHEMA:
            self._db.execute(statement)
        for table in _TABLES:
            if old[table] and "triton" not in old[table]:
                columns = _MEASUREMENT_COLUMNS if table == "measurements" else _CHOICE_COLUMNS
                self._db.execute(f"INSERT INTO {table} ({','.join(columns)}) "
                                 f"SELECT {_select(columns, old[table])} FROM {table}_schema0")
                self._db.execute(f"DROP TABLE {table}_schema0")
        self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    # --- measurements --------------------------------------------------------------------------------
    def put(self, key: MeasureKey, timing: Timing, *, floor: float | None = None) -> None:
        """Store (or replace) the measurement of `key`; `floor` is the analytic time, for efficiency."""
        row = key.row() + (timing.median, timing.spread, timing.runs, timing.method, floor, time.time())
        with self._write():
            self._db.execute(f"INSERT OR REPLACE INTO measurements ({','.join(_MEASUREMENT_COLUMNS)}) "
                             f"VALUES ({','.join('?' * len(row))})", row)

    def get(self, key: MeasureKey) -> Entry | None:
        where = " AND ".join(f"{k}=?" for k in _KEY)
        row = self._db.execute(f"SELECT {','.join(_MEASUREMENT_COLUMNS)} FROM measurements WHERE {where}",
                               key.row()).fetchone()
        return _entry(row) if row else None

    def explain_miss(self, key: MeasureKey, *, choice: bool = False) -> str | None:
        """Why `key` misses where the cache holds what it asks for under other versions: the newest such
        row's kernel, Triton and torch versions against the key's. None on a hit, or where nothing of
        the kind was ever measured (a plain miss). `choice`: explain a miss of `get_choice` instead."""
        table, same = ("choices", _CHOICE_KEY) if choice else ("measurements", _KEY)
        same = tuple(k for k in same if k not in _VERSIONS)
        rows = self._db.execute(
            f"SELECT {','.join(_VERSIONS)} FROM {table} WHERE {' AND '.join(f'{k}=?' for k in same)} "
            "ORDER BY measured_at DESC", tuple(getattr(key, k) for k in same)).fetchall()
        wanted = tuple(getattr(key, k) for k in _VERSIONS)
        if not rows or wanted in rows:
            return None
        under = _differences(dict(zip(_VERSIONS, rows[0], strict=True)), key)
        others = f" (and {len(rows) - 1} older rows under other versions)" if len(rows) > 1 else ""
        return (f"{key.kernel} on {key.types} was {'tuned' if choice else 'measured'} under {under}{others}: "
                "not used, as it may not hold for what runs now")

    def entries(self, *, device: str | None = None, kernel: str | None = None, version: str | None = None,
                triton: str | None = None, torch: str | None = None) -> list[Entry]:
        """Every measurement, optionally only those of one device, kernel, kernel version, or Triton or
        torch version."""
        given = (("device", device), ("kernel", kernel), ("version", version), ("triton", triton),
                 ("torch", torch))
        filters = {k: v for k, v in given if v}
        where = (" WHERE " + " AND ".join(f"{k}=?" for k in filters)) if filters else ""
        rows = self._db.execute(f"SELECT {','.join(_MEASUREMENT_COLUMNS)} FROM measurements{where}",
                                tuple(filters.values())).fetchall()
        return [_entry(r) for r in rows]

    def efficiency(self, device: str, kernel: str, version: str | None = None) -> float | None:
        """The kernel's measured efficiency on `device` (analytic floor / measured time, median over the
        measurements that recorded a floor), or None where none did; only measurements under the Triton
        and torch installed here count."""
        triton, torch = installed_versions()
        ratios = [e.efficiency for e in self.entries(device=device, kernel=kernel, version=version,
                                                     triton=triton, torch=torch)]
        ratios = [r for r in ratios if r is not None]
        return statistics.median(ratios) if ratios else None

    # --- tuned choices -------------------------------------------------------------------------------
    def put_choice(self, key: MeasureKey, params: dict, median: float, tried: int) -> None:
        """Record the tuned params for a kernel at a signature (`key.params` is ignored: it is the choice)."""
        row = tuple(_canonical(params) if k == "params" else getattr(key, k) for k in _KEY)
        row += (median, tried, time.time())
        with self._write():
            self._db.execute(f"INSERT OR REPLACE INTO choices ({','.join(_CHOICE_COLUMNS)}) "
                             f"VALUES ({','.join('?' * len(row))})", row)

    def get_choice(self, key: MeasureKey) -> Choice | None:
        row = self._db.execute(
            f"SELECT {','.join(_CHOICE_COLUMNS)} FROM choices WHERE {' AND '.join(f'{k}=?' for k in _CHOICE_KEY)}",
            tuple(getattr(key, k) for k in _CHOICE_KEY)).fetchone()
        if row is None:
            return None
        found = MeasureKey(*row[:len(_KEY)])
        return Choice(found, json.loads(found.params), *row[len(_KEY):])

    # --- carrying between machines -----------------------------------------------------------------
    def forget(self, kernel: str, version: str) -> int:
        """Drop every measurement and choice of `kernel` at `version` (a version no kernel has any more, in a
        file that ships); returns the rows dropped."""
        with self._write():
            before = self._db.total_changes
            for table in _TABLES:
                self._db.execute(f"DELETE FROM {table} WHERE kernel=? AND version=?", (kernel, version))
            return self._db.total_changes - before

    def carry(self, kernel: str, version: str, to: str) -> int:
        """Copy every measurement and choice of `kernel` at `version` to version `to` (an edit that builds the
        same code: `benchmarks/price_carryover.py` has checked the PTX); a row `to` already has stays.
        Returns the rows copied."""
        with self._write():
            before = self._db.total_changes
            for table, columns in (("measurements", _MEASUREMENT_COLUMNS), ("choices", _CHOICE_COLUMNS)):
                cols = ",".join(columns)
                copied = ",".join("?" if c == "version" else c for c in columns)
                self._db.execute(f"INSERT OR IGNORE INTO {table} ({cols}) SELECT {copied} FROM {table} "
                                 "WHERE kernel=? AND version=?", (to, kernel, version))
            return self._db.total_changes - before

    def merge(self, other_path: str | os.PathLike) -> int:
        """Take every measurement and choice of the cache file at `other_path`; where both hold a key, the
        newer one wins. Returns the number of rows taken. A file of schema 0 is read as migrated."""
        other = Path(other_path)
        if not other.is_file():
            raise FileNotFoundError(f"no cache file at {other} to merge")
        self._db.execute("ATTACH DATABASE ? AS other", (str(other),))
        try:
            rows = self._db.execute("SELECT name FROM other.sqlite_master WHERE type='table'")
            tables = {r[0] for r in rows}
            if not {"measurements", "choices"} <= tables:
                raise ValueError(f"{other} is not a hoid measurement cache (it has tables {sorted(tables)})")
            taken = 0
            with self._write():
                for table, columns, key in (("measurements", _MEASUREMENT_COLUMNS, _KEY),
                                            ("choices", _CHOICE_COLUMNS, _CHOICE_KEY)):
                    cols, found = ",".join(columns), _columns(self._db, "other", table)
                    updates = ",".join(f"{c}=excluded.{c}" for c in columns if c not in key)
                    before = self._db.total_changes
                    self._db.execute(
                        f"INSERT INTO main.{table} ({cols}) SELECT {_select(columns, found)} FROM other.{table} "
                        "WHERE true "
                        f"ON CONFLICT ({','.join(key)}) DO UPDATE SET {updates} "
                        f"WHERE excluded.measured_at > main.{table}.measured_at")
                    taken += self._db.total_changes - before
        finally:
            self._db.execute("DETACH DATABASE other")
        return taken

    def snapshot(self, path: str | os.PathLike) -> Path:
        """Write a consistent copy of the whole cache to `path` (a new file): the file to carry."""
        path = Path(path)
        if path.exists():
            raise FileExistsError(f"{path} exists; snapshot writes a new file (delete it or pick another name)")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db.execute("VACUUM INTO ?", (str(path),))
        return path

    def close(self) -> None:
        """Checkpoint the WAL into the main file (so that the file alone carries everything) and close."""
        try:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self._db.close()

    def __enter__(self) -> MeasureCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on an exception."""

    def __init__(self, db: sqlite3.Connection):
        self._db = db

    def __enter__(self):
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, *exc):
        self._db.execute("ROLLBACK" if exc_type else "COMMIT")


def _entry(row) -> Entry:
    return Entry(MeasureKey(*row[:len(_KEY)]), *row[len(_KEY):])


def _columns(db: sqlite3.Connection, schema: str, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA {schema}.table_info({table})")}


def _select(columns: Sequence[str], found: set[str]) -> str:
    """`columns` of a table that has `found`: the Triton and torch versions a schema-0 table lacks are
    UNKNOWN (any other column missing is an error SQLite reports)."""
    return ",".join(c if c in found or c not in ("triton", "torch") else f"'{UNKNOWN}'" for c in columns)


def _differences(found: dict, key: MeasureKey) -> str:
    """'kernel version a (now b) and torch x (now y)': how the versions of a row differ from the key's."""
    names = {"version": "kernel version", "triton": "triton", "torch": "torch"}
    parts = [f"{names[k]} {found[k]} (now {getattr(key, k)})" for k in _VERSIONS
             if found[k] not in (UNKNOWN, getattr(key, k))]
    unknown = [names[k] for k in _VERSIONS if found[k] == UNKNOWN]
    if unknown:
        parts.append(f"unknown {' and '.join(unknown)} versions (a row from before the cache recorded them)")
    return " and ".join(parts)
