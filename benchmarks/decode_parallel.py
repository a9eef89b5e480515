"""`decode.py MODEL --gpus N`: the run's slices as processes over N GPUs of one host, N at a time.

A slice is one (prompt, batch) shape and one row group (hf, fast, hoid) of the selection: the whole lattice
of one model is 4 shapes x 3 groups = 12 slices, each a `decode.py` process pinned to one GPU
(`CUDA_VISIBLE_DEVICES`), its output in OUT/logs/. Slices check against the reference without writing it;
once all have finished the reference is updated from their files (cells already there are kept) and the
merged table is printed. Each slice writes its JSON after every row, so one cut off by a time limit keeps
what it finished.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import decode_report

HERE = Path(__file__).resolve().parent
ORDER = ("hoid", "hf", "fast")  # longest first, so the last wave is short


def slices(args, keys: list[str]) -> list[tuple[int, int, str]]:
    """(prompt, batch, --rows value) of every slice, longest group first."""
    from decode_args import GROUPS

    out = []
    for group in ORDER:
        chosen = [k for k in GROUPS[group] if k in keys]
        if not chosen:
            continue
        rows = group if chosen == GROUPS[group] else ",".join(chosen)
        out += [(p, b, rows) for p in args.prompt for b in args.batch]
    return out


def child_argv(args, prompt: int, batch: int, rows: str) -> list[str]:
    argv = [args.model, "--prompt", str(prompt), "--batch", str(batch), "--rows", rows, "--new", str(args.new),
            "--warmup", str(args.warmup), "--seed", str(args.seed), "--out", str(args.out), "--no-write-reference"]
    argv += ["--reference", str(args.reference or args.out / "reference.json")]
    for flag in ("eager_prefill", "cpu_inductor", "no_profile", "no_gate", "no_warm"):
        if getattr(args, flag):
            argv.append("--" + flag.replace("_", "-"))
    for option in ("device", "optimize_budget", "agent", "gate_cache", "note"):
        if getattr(args, option) is not None:
            argv += ["--" + option.replace("_", "-"), str(getattr(args, option))]
    return argv


def run(args, keys: list[str], argv: list[str]) -> int:
    from decode_args import output_name, parse

    jobs = [child_argv(args, *s) for s in slices(args, keys)]
    logs = args.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    free, running, codes, files = list(range(args.gpus)), {}, [], []
    begin = time.perf_counter()
    while jobs or running:
        while jobs and free:
            gpu, job = free.pop(0), jobs.pop(0)
            name = output_name(parse(job))
            files.append(args.out / name)
            log = open(logs / (name[:-5] + ".log"), "w")  # closed when the process ends
            env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}
            proc = subprocess.Popen([sys.executable, str(HERE / "decode.py"), *job], stdout=log,
                                    stderr=subprocess.STDOUT, env=env)
            running[proc] = (gpu, log, name)
            print(f"[{time.perf_counter() - begin:6.0f} s] gpu {gpu}: {name}", flush=True)
        for proc in [p for p in running if p.poll() is not None]:
            gpu, log, name = running.pop(proc)
            log.close()
            codes.append(proc.returncode)
            free.append(gpu)
            print(f"[{time.perf_counter() - begin:6.0f} s] gpu {gpu}: {name} exited {proc.returncode}", flush=True)
        time.sleep(0.5)
    reference_path = args.reference or args.out / "reference.json"
    reference = json.loads(reference_path.read_text()) if reference_path.is_file() else {"cells": {}}
    cells = [c for f in files if f.is_file() for c in decode_report.read_cells(f)]
    for cell in cells:
        decode_report.check_reference(reference, decode_report.cell_id(cell["device"], cell["model"],
                                                                       cell["shape"]["key"]), cell["rows"])
    (args.out / "reference.json").write_text(json.dumps(reference, indent=1, sort_keys=True) + "\n")
    missing = [f.name for f in files if not f.is_file()]
    print(decode_report.markdown(decode_report.load([f for f in files if f.is_file()], legacy=None)))
    if missing:
        print(f"slices that wrote nothing: {', '.join(missing)} (see {logs})", file=sys.stderr)
    return max(codes + [1 if missing else 0])
