"""`DirectoryProposer` (`agent="dir:<path>"`): kernels written elsewhere, by a person or an outside
coding agent, read from a directory. Offline and deterministic: folders in name order.

One folder per kernel:

    <path>/<name>/kernel.py     the kernel source: `launch(*inputs, *outputs, **params)`, destination-passing,
                                with its tunable `PARAMS = {"BLOCK": (64, 128)}` declared as data
                                (untrusted: statically checked here, run only isolated until verified)
    <path>/<name>/region.hoid   the region it claims to replace, as a body document (`hoid regions FILE
                                --cut ...` writes one: plain inputs in the order the launch takes them,
                                outputs in the order it writes them)
    <path>/<name>/regions/<label>.hoid   optional: the same region at other types (another model's sizes),
                                one kernel each, `dir.<name>@<label>`: a region's types are part of it
    <path>/<name>/regions/<label>.json   optional: {"params": {"EPS": 1e-05}, "entry": "launch_other"}: for
                                that region, launch keywords of one value (its constants: another model's
                                eps), never tuned, and the entry that takes its inputs (a region without
                                some of region.hoid's, Llama's attention without q/k norm weights)
    <path>/<name>/meta.json     optional: {"id": "dir.<name>", "entry": "launch", "note": "why",
                                "aliases": {"<output value>": "<input value>"}, "sweep": [{...}, ...],
                                "pdl": true}

`<path>` may also be one such folder. The kernel id is `dir.<name>` unless meta says otherwise; its
version is its source's hash, so an edited kernel is a new attempt (resume skips only unchanged ones).
An output that `index_copy` writes into a region input of its type (a cache append) is in place by
default (`KernelSpec.aliases`): the launch gets the cache itself as that output and writes only the new
rows; `"aliases": {}` in meta turns that off. `"pdl": true` says the launch takes `pdl=` (bool) and, given
True, launches with programmatic dependent launch (`KernelSpec.pdl`: it waits for its predecessor's memory
before touching any, then lets its successor launch): the runtime asks for it on sm_90+ inside the chain
of PDL kernels, which one kernel without it would break.

The region is matched in the graph's e-graph by the search's own matcher, as the library's fused patterns
are (`hoid.search.library`: structurally, then exactly; from an output that reaches every input, or from
all outputs at once where none does, as for the attention prelude: `hoid.search.joint`), and the kernel
claims it only at the region's own input types. The loop finds those regions because this proposer lists
its specs in `region_specs()`. A kernel whose region does not occur (or only at types it does not claim)
gets no proposal and is journaled as skipped with the reason, which the report lists.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import HoidError
from ..ir import Graph
from ..ir.text import loads
from ..kernels.loader import KernelSource
from ..kernels.pattern import graph_pattern
from ..kernels.spec import Constraint, KernelSpec
from .proposer import Context, Proposal

KERNEL_FILE, REGION_FILE, META_FILE, REGIONS_DIR = "kernel.py", "region.hoid", "meta.json", "regions"
META_KEYS = {"id", "entry", "note", "aliases", "sweep", "pdl"}


class KernelDirError(HoidError, ValueError):
    """A kernel folder that cannot be read: what is wrong, where, and the fix."""


@dataclass(frozen=True)
class DirKernel:
    """One kernel folder's source for one of its regions, read and statically checked (nothing in it has
    run); `label` names a region of `regions/` (None: `region.hoid`)."""

    name: str
    source: KernelSource
    region: Graph
    meta: dict
    label: str | None = None
    fixed: dict = field(default_factory=dict)  # the region's launch keywords of one value (regions/LABEL.json)

    @property
    def id(self) -> str:
        base = self.meta.get("id", f"dir.{self.name}")
        return base if self.label is None else f"{base}@{self.label}"

    def spec(self) -> KernelSpec:
        try:
            return region_spec(self.source, self.region, self.id, aliases=self.meta.get("aliases"),
                               doc=self.meta.get("note", ""), pdl=self.meta.get("pdl", False), fixed=self.fixed)
        except ValueError as e:
            raise KernelDirError(f"{self.name}: {e}") from None

    def sweep(self, spec: KernelSpec) -> tuple[dict, ...]:
        if "sweep" in self.meta:
            return tuple(dict(p) for p in self.meta["sweep"])
        from ..measure.tune import neighbours  # one owner of "the defaults first, then their neighbours"

        return neighbours(spec)


def region_spec(source: KernelSource, region: Graph, kernel_id: str, *, aliases: dict | None = None,
                doc: str = "", pdl: bool = False, fixed: dict | None = None) -> KernelSpec:
    """The spec of kernel `source` for the region `region` (a body document): its pattern is the region,
    valid only at the region's input types, checked at exactly those (the region's index bounds kept)."""
    from ..verify.region import index_bounds

    types = [gi.value.type for gi in region.inputs]
    pattern = graph_pattern(region, f"region:{kernel_id}", doc=doc)
    bounds = index_bounds(region)
    shown = ", ".join(map(str, types))
    return source.to_spec(
        kernel_id, pattern, doc=doc, aliases=_aliases(region, aliases),
        constraints=(Constraint(f"the region's own input types ({shown})", lambda ts, _a: list(ts) == types),),
        examples=lambda rng: (list(types), {}), index_bounds=lambda _ts, _a: dict(bounds), pdl=pdl, fixed=fixed)


def _aliases(region: Graph, declared: dict | None) -> tuple[tuple[int, int], ...]:
    inputs = [gi.value.name for gi in region.inputs]
    outputs = [v.name for v in region.outputs]
    if declared is not None:
        try:
            return tuple(sorted((outputs.index(o.lstrip("%")), inputs.index(i.lstrip("%")))
                                for o, i in declared.items()))
        except ValueError:
            raise KernelDirError(f"aliases {declared}: each must map an output of the region ({', '.join(outputs)}) "
                                 f"to one of its inputs ({', '.join(inputs)})") from None
    producers = region.producers()
    found = []
    for o, value in enumerate(region.outputs):  # a cache append: index_copy into a region input of its type
        node = producers.get(value.name)
        if node is not None and node.op == "index_copy" and node.inputs[0].name in inputs \
                and node.inputs[0].type == value.type:
            found.append((o, inputs.index(node.inputs[0].name)))
    return tuple(found)


def load_kernel(folder: str | Path, *, kernel: str | Path | None = None, region: str | Path | None = None,
                label: str | None = None) -> DirKernel:
    """The kernel folder `folder` (or its files given apart: `kernel`, `region`, a region of `regions/` named
    by `label`)."""
    folder = Path(folder)
    kernel_path = Path(kernel) if kernel is not None else folder / KERNEL_FILE
    region_path = Path(region) if region is not None else folder / REGION_FILE
    for path, what in ((kernel_path, "the kernel source"), (region_path, "the region it replaces (a .hoid body)")):
        if not path.is_file():
            raise KernelDirError(f"{path}: no such file; a kernel folder holds {KERNEL_FILE} and {REGION_FILE} "
                                 f"(optionally {META_FILE}): {what} is missing")
    meta = {}
    if (folder / META_FILE).is_file():
        try:
            meta = json.loads((folder / META_FILE).read_text())
        except json.JSONDecodeError as e:
            raise KernelDirError(f"{folder / META_FILE}, line {e.lineno}: not JSON ({e.msg})") from None
        unknown = set(meta) - META_KEYS if isinstance(meta, dict) else {"(not an object)"}
        if unknown:
            raise KernelDirError(f"{folder / META_FILE}: unknown keys {sorted(unknown)}; it may hold "
                                 f"{', '.join(sorted(META_KEYS))}")
        if not isinstance(meta.get("pdl", False), bool):
            raise KernelDirError(f"{folder / META_FILE}: \"pdl\" must be true or false, got {meta['pdl']!r}")
    entry, fixed = region_overrides(region_path.with_suffix(".json")) if label is not None else (None, {})
    source = KernelSource.from_file(kernel_path, entry or meta.get("entry", "launch"))
    try:
        graph = loads(region_path.read_text())
    except HoidError as e:
        raise KernelDirError(f"{region_path}: {' '.join(str(e).split())}") from None
    return DirKernel(folder.resolve().name if kernel is None else kernel_path.stem, source, graph, meta, label, fixed)


def region_overrides(path: Path) -> tuple[str | None, dict]:
    """What a region's regions/LABEL.json changes for its launch: (the entry, or None for the folder's; the
    keywords of one value, {name: value}); (None, {}) where the file is absent."""
    if not path.is_file():
        return None, {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise KernelDirError(f"{path}, line {e.lineno}: not JSON ({e.msg})") from None
    usage = (f"{path}: must be {{\"params\": {{NAME: VALUE, ...}}, \"entry\": NAME}} (either may be left out; "
             f"launch keywords of one number, string or bool each), got {data!r}")
    if not isinstance(data, dict) or not set(data) <= {"params", "entry"}:
        raise KernelDirError(usage)
    params, entry = data.get("params", {}), data.get("entry")
    scalar = (int, float, str, bool)
    if not isinstance(params, dict) or not all(k.isidentifier() and isinstance(v, scalar) for k, v in params.items()):
        raise KernelDirError(usage)
    if entry is not None and not (isinstance(entry, str) and entry.isidentifier()):
        raise KernelDirError(usage)
    return entry, params


def load_folder(folder: str | Path) -> list[DirKernel]:
    """A kernel folder: its `region.hoid`, then each of `regions/*.hoid` (in name order), one kernel each."""
    folder = Path(folder)
    more = sorted((folder / REGIONS_DIR).glob("*.hoid")) if (folder / REGIONS_DIR).is_dir() else []
    return [load_kernel(folder)] + [load_kernel(folder, region=r, label=r.stem) for r in more]


def load_kernels(path: str | Path) -> list[DirKernel]:
    """Every kernel folder under `path` (in name order), or `path` itself when it is one."""
    path = Path(path)
    if not path.is_dir():
        raise KernelDirError(f"{path}: no such directory; give a folder of kernel folders (each with {KERNEL_FILE} "
                             f"and {REGION_FILE}), e.g. examples/kernels")
    if (path / KERNEL_FILE).is_file():
        return load_folder(path)
    folders = sorted(p for p in path.iterdir() if p.is_dir() and (p / KERNEL_FILE).is_file())
    if not folders:
        raise KernelDirError(f"{path}: no kernel folders in it (a folder holding {KERNEL_FILE} and {REGION_FILE})")
    return [k for p in folders for k in load_folder(p)]


class DirectoryProposer:
    """See the module doc. `path`: a folder of kernel folders, or one."""

    independent = True  # its proposals never depend on earlier outcomes: a pool may read them ahead
    together = True  # decided at once first (one whole-graph measurement for all that pass): see together.py

    def __init__(self, path: str | Path):
        self.path = str(path)
        self.name = f"dir:{self.path}"
        self.kernels = load_kernels(path)
        self._specs = [k.spec() for k in self.kernels]

    def region_specs(self) -> list[KernelSpec]:
        """The specs whose regions the loop must find in the graph (their patterns are not the library's)."""
        return list(self._specs)

    def propose(self, context: Context) -> Iterable[Proposal]:
        for kernel, spec in zip(self.kernels, self._specs, strict=True):
            found = [r for r in context.regions if r.pattern == spec.pattern.name]
            taken = [r for r in found if spec.rejects(list(r.types), r.attrs) is None]
            if not taken:  # journaled with the reason (the report lists it), never dropped in silence
                context.skip(self.name, f"{kernel.id} for {spec.pattern.name}", _unmatched(kernel, spec, found,
                                                                                         context.graph))
            for region in taken:
                note = kernel.meta.get("note") or f"{kernel.id} from {self.path}"
                yield Proposal(region.key, spec, kernel.sweep(spec), note=note)


def _unmatched(kernel: DirKernel, spec: KernelSpec, found: list, graph: Graph) -> str:
    """Why `kernel` gets no proposal: its region matched only where the kernel does not apply, or never."""
    if found:
        region = found[0]
        why = spec.rejects(list(region.types), region.attrs)
        return f"its region matched at {region.key}, where the kernel does not apply: {why}"
    if kernel.label is not None:  # one of a folder's regions for other graphs (another model's sizes)
        return (f"its region {REGIONS_DIR}/{kernel.label}.hoid never matched: it is written for {kernel.label}'s "
                "graph, at its types and attrs, and this graph has none of it")
    ops, count = sorted({n.op for n in kernel.region.nodes}), len(kernel.region.nodes)
    absent = [op for op in ops if op not in graph.op_counts()]
    why = (f"the graph has no {', '.join(absent)} node" if absent else
           "its ops all occur in the graph, but not connected as in the region, or at other types or attrs")
    return (f"its region never matched: no part of the graph's e-graph (after the rule sets) computes it ({count} "
            f"node{'s' * (count != 1)}: {', '.join(ops)}; {why}); cut the region from this graph (hoid regions FILE "
            f"--cut t1,t2,... --out region.hoid) so its ops, attrs and types are the graph's")

