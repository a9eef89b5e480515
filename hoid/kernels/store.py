"""The per-device store of accepted kernels: what the loop accepted on a GPU, for later runs and for the
`torch.compile` backend, which reads it without importing the agent.

    store = AcceptedStore()                          # HOID_KERNELS, else ~/.cache/hoid/kernels.sqlite
    store.save("NVIDIA H200", accepted)              # an `Accepted` with measured evidence
    found = store.load("NVIDIA H200")                # -> Loaded(current=[...], stale=[...])
    kernels = KernelSet.default() ... found.kernel_set()

Rows are keyed by device, kernel id, input types and attrs. Only measured acceptances are stored: one on
modelled evidence is provisional and never persisted. A row whose kernel changed since (another version
of the library's source, or of an agent's source) comes back under `stale`, to be checked again before
reuse. A kernel built from source (a generated or an agent's kernel), which a later process has not
registered, is stored with its source text and what rebuilding it takes (its region: the pattern's graph at
the row's types and attrs; its in-place outputs and PDL flags), and rebuilt from them (`KernelSource.to_spec`):
before, every generated kernel a GPU run had accepted
came back stale in the next process ("not registered"), was generated and checked again (the Whisper
encoder's seven: 28 s of a 2-minute budget, H100 12-05), and the `torch.compile` backend never used one.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..ir import TensorType
from .kernel_set import Accepted, KernelSet
from .spec import KernelSpec

SCHEMA = """
create table if not exists accepted (
    device text not null, kernel text not null, types text not null, attrs text not null,
    version text not null, params text not null, source text, entry text, rebuild text,
    primary key (device, kernel, types, attrs)
)
"""
COLUMNS = ("device", "kernel", "types", "attrs", "version", "params", "source", "entry", "rebuild")


def default_store_path() -> Path:
    return Path(os.environ.get("HOID_KERNELS") or Path.home() / ".cache" / "hoid" / "kernels.sqlite")


def _types_text(types) -> str:
    return json.dumps([[list(t.shape), t.dtype, list(t.strides) if t.strides else None] for t in types])


def _types_of(text: str) -> tuple[TensorType, ...]:
    return tuple(TensorType(shape, dtype, strides) for shape, dtype, strides in json.loads(text))


def _json(value) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


@dataclass
class Loaded:
    """`current`: rows whose kernel is at the stored version; `stale`: (row's kernel id, why) for rows whose
    kernel changed or can no longer be found, to be checked again before reuse."""

    current: list[Accepted] = field(default_factory=list)
    stale: list[tuple[str, str]] = field(default_factory=list)

    def kernel_set(self, base: KernelSet | None = None) -> KernelSet:
        """`base` (default: the built-in library) with every current acceptance added."""
        base = base if base is not None else KernelSet.default()
        for a in self.current:
            base = base.accept(a.spec, a.types, a.attrs, a.params)
        return base


class AcceptedStore:
    """SQLite file of accepted kernels per device (see the module doc)."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else default_store_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path)
        self.db.execute(SCHEMA)
        have = {row[1] for row in self.db.execute("pragma table_info(accepted)")}
        if "rebuild" not in have:  # a store written before source kernels kept what rebuilds them
            self.db.execute("alter table accepted add column rebuild text")
        self.db.commit()

    def save(self, device: str, accepted: Accepted) -> None:
        """Record `accepted` for `device`; refuses provisional (modelled) evidence."""
        if accepted.evidence != "measured":
            raise ValueError(f"kernel {accepted.spec.id}: accepted on {accepted.evidence} evidence is provisional "
                             "and is not stored for a device; measure it on the device first")
        spec = accepted.spec
        source = getattr(spec.launch, "source", None)  # a spec built from kernel source carries it
        rebuild = None
        if source is not None:  # what a later process rebuilds it from (see the module doc)
            from ..ir.text import dumps

            rebuild = _json({"region": dumps(spec.pattern.graph(list(accepted.types), dict(accepted.attrs))),
                             "aliases": [list(a) for a in spec.aliases], "pdl": spec.pdl,
                             "pdl_early": list(spec.pdl_early)})
        row = (device, spec.id, _types_text(accepted.types), _json(accepted.attrs), spec.version,
               _json(accepted.params), getattr(source, "text", None), getattr(source, "entry", None), rebuild)
        self.db.execute(f"insert or replace into accepted ({', '.join(COLUMNS)}) values ({', '.join('?' * len(row))})",
                        row)
        self.db.commit()

    def load(self, device: str, *, resolve: Callable[[str, str | None, str | None, str | None], KernelSpec | None]
             | None = None) -> Loaded:
        """The acceptances stored for `device` (never another's). `resolve(kernel_id, source, entry, rebuild)`
        finds a row's spec (default `registered_or_rebuilt`)."""
        resolve = resolve or registered_or_rebuilt
        found = Loaded()
        rows = self.db.execute("select kernel, types, attrs, version, params, source, entry, rebuild from accepted "
                               "where device = ? order by kernel, types", (device,)).fetchall()
        for kernel, types, attrs, version, params, source, entry, rebuild in rows:
            try:
                spec = resolve(kernel, source, entry, rebuild)
            except Exception as e:  # noqa: BLE001  one row that no longer rebuilds costs that row, not the load
                found.stale.append((kernel, f"its kernel could not be rebuilt from the store ({type(e).__name__}: "
                                            f"{e}): it is proposed and checked again"))
                continue
            if spec is None:
                found.stale.append((kernel, "its kernel is not registered in this process, and the store holds no "
                                            "source and region to rebuild it from"))
            elif spec.version != version:
                found.stale.append((kernel, f"accepted at version {version}, the kernel is now at {spec.version}"))
            else:
                found.current.append(Accepted(spec, _types_of(types), json.loads(attrs), json.loads(params)))
        return found

    def forget(self, device: str, kernel_id: str) -> int:
        """Drop every row of `kernel_id` for `device`; returns how many."""
        count = self.db.execute("delete from accepted where device = ? and kernel = ?", (device, kernel_id)).rowcount
        self.db.commit()
        return count

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> AcceptedStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def registered_or_rebuilt(kernel_id: str, source: str | None, entry: str | None, rebuild: str | None
                          ) -> KernelSpec | None:
    """The registry's `kernel_id`; else, for kernel source stored with its region, the spec rebuilt from them
    (its version is its source's hash, so an edited source comes back stale) and registered, as a kernel that
    passed its check is (`hoid.agent.executor.register_checked`): it passed when it was accepted, at this
    version, and the runtime binds kernel nodes by id. None where neither finds it."""
    from .registry import all_kernels, register

    found = all_kernels().get(kernel_id)
    if found is not None or source is None or rebuild is None:
        return found
    from ..ir.text import loads
    from .codegen.generate import body_pattern
    from .loader import KernelSource

    how = json.loads(rebuild)
    spec = KernelSource(source, entry or "launch").to_spec(
        kernel_id, body_pattern(kernel_id, loads(how["region"])), aliases=tuple(map(tuple, how["aliases"])),
        pdl=how["pdl"], pdl_early=tuple(how["pdl_early"]), doc=f"rebuilt from the accepted-kernel store: {kernel_id}")
    register(spec, replace=True)
    return spec
