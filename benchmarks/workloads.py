"""One entry point for issue 25's workloads: `python benchmarks/workloads.py NAME [ARGS...]`.

    python benchmarks/workloads.py sdxl-unet --out DIR            # = workload_sdxl.py --part unet --out DIR
    python benchmarks/workloads.py bge-m3 --tiny --device cpu     # every script's own arguments pass through
    python benchmarks/workloads.py NAME --help                    # that script's arguments

Each NAME runs its script's `main` in this process with the arguments after NAME (and the script's part, for
the two SDXL workloads); the exit status is the script's. The scripts hold the rows, the gate and the JSON.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# NAME -> (script module, the arguments it is always given)
WORKLOADS = {
    "qwen3-moe": ("workload_qwen3_moe", []),
    "whisper": ("workload_whisper", []),
    "bge-m3": ("workload_bge_m3", []),
    "sdxl-unet": ("workload_sdxl", ["--part", "unet"]),
    "sdxl-vae": ("workload_sdxl", ["--part", "vae"]),
}


def usage() -> str:
    lines = [__doc__.splitlines()[0], "", "workloads:"]
    lines += [f"  {name:<10} benchmarks/{script}.py {' '.join(fixed)}".rstrip()
              for name, (script, fixed) in WORKLOADS.items()]
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in WORKLOADS:
        print(f"unknown workload {name!r}; choose from: {', '.join(WORKLOADS)}", file=sys.stderr)
        return 2
    script, fixed = WORKLOADS[name]
    return importlib.import_module(script).main([*fixed, *rest])


if __name__ == "__main__":
    sys.exit(main())
