"""Writes each example kernel's region.hoid: its region cut from `hoid.models.examples.decode_layer`.

    python examples/kernels/make_regions.py                  # Qwen3-1.7B's shapes, bf16 (what ships)
    python examples/kernels/make_regions.py --small OUT      # a tiny f32 layer (OUT/layer.hoid), the kernels
                                                             # copied to OUT with their regions cut from it
    hoid optimize OUT/layer.hoid --agent dir:OUT --device h200   # then: the loop on it, on a CPU (modelled)

A region is named by the values its nodes produce (`Region.of`), the same at every size of the layer:
`hoid regions FILE --cut t27,t28,...` prints the same cut of a saved document. A region's types are part of
it, so a kernel written for any size gets its region at other models' sizes too, in `regions/MODEL.hoid`
(`OTHER_MODELS`): the same cut of the layer built at that model's sizes.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent

# kernel folder -> the values (nodes) of decode_layer its region is made of (the halves': `halves`)
CUTS = {
    "qkv_norm_rope_cache": [f"t{i}" for i in range(1, 21)],  # q/k/v GEMVs .. q/k norms, RoPE, cache appends
    "rmsnorm_gate_up_silu": [f"t{i}" for i in range(27, 34)],  # post-attention norm .. silu(gate) * up
    "oproj_residual_rmsnorm": [f"t{i}" for i in range(24, 28)],  # o projection, residual add, next norm
    "wrong_rmsnorm_gate_up_silu": [f"t{i}" for i in range(27, 34)],
    "slow_rmsnorm_gate_up_silu": [f"t{i}" for i in range(27, 34)],
}
HALVES = ("attention_half", "mlp_half")  # cut at the residual add, whatever the layer's attention holds
# the halves lost on the H200 (12-05: 23.7 and 25.1 us alone, the layer 72% slower with either; see
# benchmarks/results/dir_kernels/halves/): kept apart, in halves/, so that `dir:examples/kernels` (the decode
# benchmark's agent) does not spend its budget on them; `dir:examples/kernels/halves` proposes them


def folder(name: str) -> str:
    """A kernel's folder under examples/kernels."""
    return f"halves/{name}" if name in HALVES else name
SMALL = dict(hidden=64, heads=2, kv_heads=1, head_dim=32, intermediate=128, cache_len=16, dtype="f32")
# the zoo models whose layer the halves also take (the other kernels are Qwen3-1.7B's alone), at the decode
# benchmark's cache (decode_layer's default); regions/MODEL.json gives a launch what differs from Qwen3's:
# Llama's eps (1e-5) and, for its attention without q/k norms, the entry that takes no norm weights
OTHER_MODELS = ("qwen3-4b", "llama-3.2-1b", "llama-3.1-8b")
EPS = 1e-6  # the kernels' own eps (Qwen3's)
NO_QK_NORM_ENTRY = {"attention_half": "launch_no_qk_norm"}
# rejected on the H200 (12-05): the layer's output 8.9% off at Llama-3.1-8B's sizes, the caches right; right
# under the interpreter at those sizes. Its tickets then had no barrier before them (a warp's partials could
# follow the ticket that announced them: docs/outside-agents.md), fixed since: to re-admit after a GPU run
NOT_AT = {"attention_half": ("llama-3.1-8b",)}


def model_sizes(name: str) -> dict:
    """decode_layer's sizes (and eps) for a zoo model."""
    from hoid.models.configs import config

    c = config(name)
    return dict(hidden=c.hidden_size, heads=c.num_attention_heads, kv_heads=c.num_key_value_heads,
                head_dim=getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
                intermediate=c.intermediate_size, eps=c.rms_norm_eps, qk_norm=c.model_type.startswith("qwen3"))


def halves(graph) -> dict:
    """The values of each half of a decode layer: the attention half up to and with the residual add, the
    MLP half after it (t0..t26 and t27..t36 with q/k norms, t0..t24 and t25..t34 without)."""
    values = [node.outputs[0].name for node in graph.nodes]
    residual = next(i for i, node in enumerate(graph.nodes) if node.op == "add")
    return {"attention_half": values[:residual + 1], "mlp_half": values[residual + 1:]}


def regions(graph, names=None) -> dict:
    from hoid.ir import Region

    out = {}
    for name, values in {**CUTS, **halves(graph)}.items():
        if names is None or name in names:
            region = Region.of(graph, values)
            region.check_convex()
            out[name] = region.body()
    return out


def overrides(name: str, sizes: dict) -> dict:
    """regions/MODEL.json for half `name` at a model's `sizes`: what its launch needs that Qwen3's does not."""
    differs = {}
    if not sizes["qk_norm"] and name in NO_QK_NORM_ENTRY:
        differs["entry"] = NO_QK_NORM_ENTRY[name]
    if sizes["eps"] != EPS:
        differs["params"] = {"EPS": sizes["eps"]}
    return differs


def write_other_models() -> None:
    import hoid
    from hoid.models.examples import decode_layer

    for model in OTHER_MODELS:
        sizes = model_sizes(model)
        for name, body in regions(decode_layer(**sizes), [h for h in HALVES if model not in NOT_AT.get(h, ())]).items():
            (HERE / folder(name) / "regions").mkdir(exist_ok=True)
            hoid.save(body, HERE / folder(name) / "regions" / f"{model}.hoid")
            sidecar, differs = HERE / folder(name) / "regions" / f"{model}.json", overrides(name, sizes)
            if differs:
                sidecar.write_text(json.dumps(differs) + "\n")
            else:
                sidecar.unlink(missing_ok=True)


def write(out: Path, graph, *, copy_kernels: bool) -> None:
    import hoid

    for name, body in regions(graph).items():
        target = out / folder(name)
        target.mkdir(parents=True, exist_ok=True)
        if copy_kernels:
            for f in (HERE / folder(name)).iterdir():
                if f.name != "region.hoid" and f.is_file():
                    shutil.copy(f, target / f.name)
        hoid.save(body, target / "region.hoid")


def main() -> None:
    from hoid.models.examples import decode_layer

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", metavar="OUT", help="a tiny f32 layer and its regions, with the kernels, to OUT")
    args = parser.parse_args()
    if args.small:
        import hoid

        graph = decode_layer(**SMALL)
        write(Path(args.small), graph, copy_kernels=True)
        hoid.save(graph, Path(args.small) / "layer.hoid")
    else:
        write(HERE, decode_layer(), copy_kernels=False)
        write_other_models()


if __name__ == "__main__":
    main()
