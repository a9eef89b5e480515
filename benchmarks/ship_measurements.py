"""Ship a GPU run's kernel measurements with the project: merged into `benchmarks/results/kernels_measure.sqlite`.

    python benchmarks/ship_measurements.py /work/.device/N/hoid-run-qwen3-1.7b-p128-n256-b1.tar.gz [...]
    python benchmarks/ship_measurements.py run/measure.sqlite --dry-run

Every `hoid.optimize` from a source checkout merges that file into its measurement cache
(`hoid.agent.executor.SHIPPED`), so a kernel measured once on the H200, at its version and the H200's
torch and Triton, is not measured again by the next run there: on 2026-12-03 the library's kernel
measurements took 39 of a 1-minute optimize's 60 s, and the budget ended before the merged QKV projection
was reached. The inputs are measurement caches or the run archives `benchmarks/decode.py` writes (its
`hoid-run-*.tar.gz`: the journals, the stores and the cache of one shape's two optimizes). Rows merge by
key (device, kernel, version, torch, triton, params, shapes), the newer winning; rows of a kernel's older
versions stay (another checkout may run them) until `--prune` drops those no library kernel has now.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tarfile
import tempfile
from pathlib import Path

from hoid.agent.executor import SHIPPED
from hoid.measure.cache import MeasureCache

MEASURE_CACHE_NAME = "measure.sqlite"  # the cache's name inside a run archive (decode_hoid.prepare's)


def caches_in(path: Path, scratch: Path) -> list[Path]:
    """The measurement cache files `path` holds: itself (a .sqlite) or those of a run archive."""
    if path.suffix == ".sqlite":
        return [path]
    if not tarfile.is_tarfile(path):
        raise SystemExit(f"{path}: neither a measurement cache (.sqlite) nor a run archive (.tar.gz)")
    with tarfile.open(path) as tar:
        names = [m for m in tar.getmembers() if m.isfile() and m.name == MEASURE_CACHE_NAME]
        if not names:
            raise SystemExit(f"{path} holds no {MEASURE_CACHE_NAME} (it has {tar.getnames()})")
        target = scratch / path.name.removesuffix(".tar.gz")
        tar.extractall(target, members=names, filter="data")
    return [target / MEASURE_CACHE_NAME]


def kernel_counts(path: Path) -> collections.Counter:
    with MeasureCache(path) as cache:
        return collections.Counter(f"{e.key.kernel}@{e.key.version}" for e in cache.entries())


def prune(path: Path) -> int:
    """Drop the rows of kernel versions that no library kernel has now; returns how many versions."""
    from hoid.kernels import all_kernels

    current = {name: spec.version for name, spec in all_kernels().items()}
    with MeasureCache(path) as cache:
        stale = {(e.key.kernel, e.key.version) for e in cache.entries() if current.get(e.key.kernel) != e.key.version}
        for kernel, version in stale:
            cache.forget(kernel, version)
    return len(stale)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", type=Path, help="measurement caches or decode.py run archives")
    parser.add_argument("--into", type=Path, default=SHIPPED, help=f"the shipped cache (default {SHIPPED})")
    parser.add_argument("--prune", action="store_true", help="drop versions no library kernel has now")
    parser.add_argument("--dry-run", action="store_true", help="say what each input holds; change nothing")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        sources = [c for path in args.inputs for c in caches_in(path, Path(scratch))]
        for source in sources:
            counts = kernel_counts(source)
            print(f"{source}: {sum(counts.values())} measurements of {len(counts)} kernel versions")
            for name, n in sorted(counts.items()):
                print(f"  {n:4d}  {name}")
        if args.dry_run:
            return 0
        with MeasureCache(args.into) as shipped:
            taken = sum(shipped.merge(source) for source in sources)
        print(f"{args.into}: {taken} rows taken")
    if args.prune:
        print(f"{args.into}: dropped the rows of {prune(args.into)} kernel versions no library kernel has now")
    return 0


if __name__ == "__main__":
    sys.exit(main())
