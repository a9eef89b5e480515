"""The measurement cache: SQLite, keyed by device, kernel id and version, params, input types and attrs.

Hours of search survive a restart, and a second model reuses what the first measured. The file is plain
SQLite in WAL mode, safe for several processes writing at once (each write is one short transaction that
waits for the lock). To carry results to or from the GPU machine, `snapshot()` the cache into a single
file (consistent even while others write; or `close()` it, which checkpoints the WAL into its file), copy
that file, and `merge()` it into the cache on the other side: the newer measurement of a key wins.

The path is `HOID_CACHE` if set, else `~/.cache/hoid/measure.sqlite`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..ir import TensorType
from .timing import Timing

_KEY = ("device", "kernel", "version", "params", "types", "attrs")
_SCHEMA = ("""
CREATE TABLE IF NOT EXISTS measurements (
    device TEXT NOT NULL, kernel TEXT NOT NULL, version TEXT NOT NULL,
    params TEXT NOT NULL, types TEXT NOT NULL, attrs TEXT NOT NULL,
    median REAL NOT NULL, spread REAL NOT NULL, runs INTEGER NOT NULL, method TEXT NOT NULL,
    floor REAL, measured_at REAL NOT NULL,
    PRIMARY KEY (device, kernel, version, params, types, attrs))""", """
CREATE TABLE IF NOT EXISTS choices (
    device TEXT NOT NULL, kernel TEXT NOT NULL, version TEXT NOT NULL, params TEXT NOT NULL,
    types TEXT NOT NULL, attrs TEXT NOT NULL, median REAL NOT NULL, tried INTEGER NOT NULL,
    measured_at REAL NOT NULL,
    PRIMARY KEY (device, kernel, version, types, attrs))""")
_MEASUREMENT_COLUMNS = _KEY + ("median", "spread", "runs", "method", "floor", "measured_at")
_CHOICE_COLUMNS = _KEY + ("median", "tried", "measured_at")


def default_cache_path() -> Path:
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

    @classmethod
    def of(cls, device: str, kernel: str, version: str, params: dict, types: Sequence[TensorType],
           attrs: dict | None = None) -> MeasureKey:
        return cls(device, kernel, version, _canonical(params), ";".join(str(t) for t in types),
                   _canonical(attrs or {}))

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
                for statement in _SCHEMA:
                    self._db.execute(statement)
        except sqlite3.DatabaseError as e:
            self._db.close()
            raise ValueError(f"{self.path} is not a usable hoid measurement cache ({e}); "
                             "delete it or point HOID_CACHE elsewhere") from None

    # --- transactions ------------------------------------------------------------------------------
    def _write(self):
        return _Transaction(self._db)

    # --- measurements --------------------------------------------------------------------------------
    def put(self, key: MeasureKey, timing: Timing, *, floor: float | None = None) -> None:
        """Store (or replace) the measurement of `key`; `floor` is the analytic time, for efficiency."""
        row = key.row() + (timing.median, timing.spread, timing.runs, timing.method, floor, time.time())
        with self._write():
            self._db.execute(f"INSERT OR REPLACE INTO measurements VALUES ({','.join('?' * len(row))})", row)

    def get(self, key: MeasureKey) -> Entry | None:
        where = " AND ".join(f"{k}=?" for k in _KEY)
        row = self._db.execute(f"SELECT {','.join(_MEASUREMENT_COLUMNS)} FROM measurements WHERE {where}",
                               key.row()).fetchone()
        return _entry(row) if row else None

    def entries(self, *, device: str | None = None, kernel: str | None = None,
                version: str | None = None) -> list[Entry]:
        """Every measurement, optionally only those of one device, kernel, or kernel version."""
        filters = {k: v for k, v in (("device", device), ("kernel", kernel), ("version", version)) if v}
        where = (" WHERE " + " AND ".join(f"{k}=?" for k in filters)) if filters else ""
        rows = self._db.execute(f"SELECT {','.join(_MEASUREMENT_COLUMNS)} FROM measurements{where}",
                                tuple(filters.values())).fetchall()
        return [_entry(r) for r in rows]

    def efficiency(self, device: str, kernel: str, version: str | None = None) -> float | None:
        """The kernel's measured efficiency on `device` (analytic floor / measured time, median over the
        measurements that recorded a floor), or None where none did."""
        ratios = [e.efficiency for e in self.entries(device=device, kernel=kernel, version=version)]
        ratios = [r for r in ratios if r is not None]
        return statistics.median(ratios) if ratios else None

    # --- tuned choices -------------------------------------------------------------------------------
    def put_choice(self, key: MeasureKey, params: dict, median: float, tried: int) -> None:
        """Record the tuned params for a kernel at a signature (`key.params` is ignored: it is the choice)."""
        row = key.row()[:3] + (_canonical(params),) + key.row()[4:] + (median, tried, time.time())
        with self._write():
            self._db.execute(f"INSERT OR REPLACE INTO choices ({','.join(_CHOICE_COLUMNS)}) "
                             f"VALUES ({','.join('?' * len(row))})", row)

    def get_choice(self, key: MeasureKey) -> Choice | None:
        row = self._db.execute(
            f"SELECT {','.join(_CHOICE_COLUMNS)} FROM choices "
            "WHERE device=? AND kernel=? AND version=? AND types=? AND attrs=?",
            (key.device, key.kernel, key.version, key.types, key.attrs)).fetchone()
        if row is None:
            return None
        found = MeasureKey(*row[:6])
        return Choice(found, json.loads(found.params), row[6], row[7], row[8])

    # --- carrying between machines -----------------------------------------------------------------
    def merge(self, other_path: str | os.PathLike) -> int:
        """Take every measurement and choice of the cache file at `other_path`; where both hold a key, the
        newer one wins. Returns the number of rows taken."""
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
                choice_key = tuple(k for k in _KEY if k != "params")
                for table, columns, key in (("measurements", _MEASUREMENT_COLUMNS, _KEY),
                                            ("choices", _CHOICE_COLUMNS, choice_key)):
                    cols = ",".join(columns)
                    updates = ",".join(f"{c}=excluded.{c}" for c in columns if c not in key)
                    before = self._db.total_changes
                    self._db.execute(
                        f"INSERT INTO main.{table} ({cols}) SELECT {cols} FROM other.{table} WHERE true "
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
    return Entry(MeasureKey(*row[:6]), *row[6:])
