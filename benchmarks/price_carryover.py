"""Carry a kernel's shipped H200 prices across an edit that leaves the code it builds unchanged.

    python benchmarks/price_carryover.py --from-rev 165b16d triton.linear triton.rope --why "tl.cast for .to"
    python benchmarks/price_carryover.py --fingerprint triton.linear        # this checkout's, as JSON

A kernel's version hashes its module's text, so a comment, a docstring or a rewrite that Triton compiles
to the same code strands its rows in `decode_prices.json` until the next H200 price run; meanwhile the
search prices it modelled and chooses differently. A carry-over names the priced version (`from`) and the
current one (`to`) of a kernel whose plain builds (every build `spec.compile` makes without programmatic
dependent launch, for sm_90 and sm_100: the representative builds its tests check) compile to the same
PTX, its debug lines aside: the GPU runs the same instructions, so the rows measured it. Typical cases: a
comment or docstring, a rewrite Triton compiles alike (`tl.cast(n, ...)` for `n.to(...)`), a PDL variant
added beside the plain build, or an edit to a module the kernel's version covers but whose code it does not
run (CuTe's GEMV imports the Triton GEMV's patterns). `--from-rev` builds both (the old one from a git worktree of
that revision) and writes an entry only where they agree; `hoid.search.prices` reads the file beside the
shipped rows, and a test rebuilds each entry's kernel and compares its fingerprint, so an entry cannot
outlive the code it vouches for. A kernel whose PTX differs is refused, saying so: it waits for prices.
The shipped measurement cache (`kernels_measure.sqlite`, what `hoid.optimize` reads on the H200) gets the
carried kernel's rows copied to its new version too.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHS = ("sm_90", "sm_100")


_DEBUG_LABEL = re.compile(r"\$L__tmp\d+:$")


def _normalized(ptx: str) -> str:
    """The PTX without what names the source (line info, file table, comments, debug sections, and the labels
    `$L__tmpN` that only debug info points at: a helper moved into a device function adds them, 12-04)."""
    ptx = re.sub(r"\.section\s+\.debug\w*\s*\{.*?\}", "", ptx, flags=re.S)
    return "\n".join(line for line in ptx.splitlines()
                     if not line.strip().startswith((".loc", ".file", "//")) and not _DEBUG_LABEL.match(line.strip()))


def fingerprints_here(kernel_ids: list[str]) -> dict[str, dict]:
    """{kernel: {"version", "fingerprint", "builds"}} of this process's hoid; Triton compiling (not interpreting),
    CuTe DSL installed for a CuTe kernel."""
    import triton

    from hoid.kernels import all_kernels

    captured: list[str] = []
    compile_ = triton.compile

    def capture(*args, **kwargs):
        built = compile_(*args, **kwargs)
        captured.append(built.asm["ptx"])
        return built

    triton.compile = capture
    out = {}
    try:
        for kernel_id in kernel_ids:
            spec = all_kernels()[kernel_id]
            if spec.backend not in ("triton", "cute"):
                raise SystemExit(f"{kernel_id}: a {spec.backend} kernel; carry-overs are for Triton and CuTe kernels")
            captured.clear()
            for arch in (a for a in ARCHS if a in spec.archs):  # the Hopper GEMM builds for sm_90 alone
                built = spec.compile(arch)
                if spec.backend == "cute":  # CuTe's builds hold their PTX; Triton's are captured at compile
                    captured.extend(b.ptx for b in (built if isinstance(built, list) else [built]))
            plain = [_normalized(p) for p in captured if "griddepcontrol" not in p]
            digest = hashlib.sha256("\n=====\n".join(plain).encode()).hexdigest()[:16]
            out[kernel_id] = {"version": spec.version, "fingerprint": digest, "builds": len(plain)}
    finally:
        triton.compile = compile_
    return out


def fingerprints(kernel_ids: list[str], checkout: Path = ROOT) -> dict[str, dict]:
    """`fingerprints_here` of the hoid in `checkout`, in a process of its own (Triton compiling there)."""
    env = {**os.environ, "TRITON_INTERPRET": "0", "PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--fingerprint", *kernel_ids],
                          cwd=checkout, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"fingerprinting {kernel_ids} in {checkout} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def carried(before: dict | None, kernel_id: str, old: dict, new: dict, rev: str, why: str,
            priced_at: frozenset[str] = frozenset()) -> dict:
    """The carry-over entry of `kernel_id` from its `old` build (`fingerprints`' at `rev`) to its `new` one, same
    PTX. A kernel already carried to the old version (`before`) keeps the version its rows were measured at:
    the PTX was the same there too, so it is the same from there to here; so does one whose entry vouches for
    the old build's PTX (the same edit carried twice, the first carry not yet committed). Unless the shipped
    rows stand at the old version itself (`priced_at`: the versions they price): a kernel priced again after
    its last carry-over (12-05: the Triton GEMVs) carries those rows, not the earlier ones it no longer has."""
    same = before is not None and (before["to"] == old["version"] or before.get("fingerprint") == old["fingerprint"])
    priced = before["from"] if same and old["version"] not in priced_at else old["version"]
    return {"kernel": kernel_id, "from": priced, "to": new["version"], "fingerprint": new["fingerprint"],
            "builds": new["builds"], "rev": rev, "why": why}


def shipped_versions(kernel_id: str, path: Path | None = None) -> frozenset[str]:
    """The versions of `kernel_id` that the shipped H200 prices hold rows of."""
    from hoid.search.prices import SHIPPED

    path = path or SHIPPED
    rows = json.loads(path.read_text())["rows"] if path.is_file() else []
    return frozenset(r["version"] for r in rows if r["kernel"] == kernel_id)


def carry_measurements(kernel_id: str, versions: set[str], to: str, path: Path | None = None) -> int:
    """The shipped measurement cache's rows of `kernel_id` at `versions`, copied to version `to`: the next
    run on the H200 reads them instead of timing the same code again (hoid.agent.executor.SHIPPED)."""
    from hoid.agent.executor import SHIPPED
    from hoid.measure.cache import MeasureCache

    path = path or SHIPPED
    if not path.is_file():
        return 0
    with MeasureCache(path) as cache:
        return sum(cache.carry(kernel_id, v, to) for v in sorted(versions) if v != to)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernels", nargs="+")
    parser.add_argument("--fingerprint", action="store_true", help="print this checkout's fingerprints (JSON)")
    parser.add_argument("--from-rev", help="the git revision whose versions the shipped rows price")
    parser.add_argument("--why", default="", help="what the edit was (kept in the entry)")
    parser.add_argument("--out", type=Path, default=None, help="default: the file beside the shipped prices")
    args = parser.parse_args(argv)
    if args.fingerprint:  # run under an older checkout too (`fingerprints`): nothing of today's hoid above this
        print(json.dumps(fingerprints_here(args.kernels)))
        return 0
    if not args.from_rev:
        parser.error("--from-rev REV is needed (or --fingerprint)")
    from hoid.search.prices import CARRYOVER, carryovers

    out = args.out or CARRYOVER
    with tempfile.TemporaryDirectory() as scratch:
        old_tree = Path(scratch) / "old"
        added = subprocess.run(["git", "worktree", "add", "--detach", "-q", str(old_tree), args.from_rev], cwd=ROOT,
                               capture_output=True, text=True)
        if added.returncode != 0:
            raise SystemExit(f"--from-rev {args.from_rev}: git could not check it out ({added.stderr.strip()}); "
                             "name a commit of this repository, the one whose versions decode_prices.json prices")
        try:
            old = fingerprints(args.kernels, old_tree)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old_tree)], cwd=ROOT, check=True)
    new = fingerprints(args.kernels)
    rev = subprocess.run(["git", "rev-parse", "--short", args.from_rev], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()  # a commit, not a name that moves ("HEAD")
    entries = {e["kernel"]: e for e in carryovers(out)}
    refused = 0
    for kernel_id in args.kernels:
        a, b = old[kernel_id], new[kernel_id]
        if a["version"] == b["version"]:
            print(f"{kernel_id}: version {a['version']} unchanged since {args.from_rev}: nothing to carry")
        elif a["fingerprint"] != b["fingerprint"]:
            refused += 1
            print(f"{kernel_id}: refused: its plain builds compile to other PTX than at {args.from_rev} "
                  f"({a['fingerprint']} -> {b['fingerprint']}): it needs H200 prices")
        else:
            entries[kernel_id] = carried(entries.get(kernel_id), kernel_id, a, b, rev, args.why,
                                         shipped_versions(kernel_id))
            copied = carry_measurements(kernel_id, {a["version"], entries[kernel_id]["from"]}, b["version"])
            print(f"{kernel_id}: {entries[kernel_id]['from']} -> {b['version']}: same PTX in {b['builds']} builds: "
                  f"carried (and {copied} shipped measurements)")
    out.write_text(json.dumps({"doc": "benchmarks/price_carryover.py", "carryovers": sorted(
        entries.values(), key=lambda e: e["kernel"])}, indent=1) + "\n")
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
