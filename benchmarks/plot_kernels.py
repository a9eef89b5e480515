"""The measured kernel table (benchmarks/results/kernels.json) against the memory ceiling, as a PNG.

    python benchmarks/plot_kernels.py [--out docs/images/kernels_bandwidth.png]

Every point is a measured time (hoid's kernel, CUDA-graph replay on the H200 of the results file) as bytes
moved per second, against the copy bandwidth measured at the start of that run: decode kernels are
memory-bound, and the table records bytes, not FLOPs. Nothing here is modelled.
"""

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", default=ROOT / "benchmarks" / "results" / "kernels.json")
    parser.add_argument("--out", default=ROOT / "docs" / "images" / "kernels_bandwidth.png")
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = json.loads(Path(args.results).read_text())
    bw = data["copy_bandwidth"]
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=100)
    points = [(c["moved_bytes"], c["gbps"] * 1e9, c) for c in data["cases"]]
    for model, colour in (("Qwen3-1.7B", "tab:blue"), ("Qwen3-4B", "tab:orange"), ("Llama-3.1-8B", "tab:green"),
                          ("large", "tab:red")):
        xs = [(x, y) for x, y, c in points if c["model"] == model]
        ax.scatter([x for x, _ in xs], [y / 1e12 for _, y in xs], s=16, color=colour,
                   label=model if model != "large" else "large shapes")
    ax.axhline(bw / 1e12, color="black", lw=1, label=f"copy bandwidth measured that day, {bw / 1e12:.2f} TB/s")
    ax.set_xscale("log")
    ax.set_xlabel("bytes the kernel must move (fewest)")
    ax.set_ylabel("achieved TB/s (measured)")
    ax.set_title(f"hoid's kernels on one {data['device']}: measured {data['date'][:10]}", fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(args.out)
    print(f"wrote {args.out}: {len(points)} measured kernels")


if __name__ == "__main__":
    main()
