"""`benchmarks/search_ablation.py` on the CPU (tiny model): the four variants timed by the decode loop, and
the summary drawn from their kernels and speeds."""

import json

import pytest

from .helpers import run_main

pytest.importorskip("transformers")


@pytest.mark.slow
def test_the_ablation_writes_every_variant_and_what_each_contributes(tmp_path):
    env = {"HOID_KERNELS": str(tmp_path / "kernels.sqlite"), "HOID_JOURNAL": str(tmp_path / "journal.sqlite")}
    code, stdout = run_main("search_ablation", ["--tiny", "--device", "cpu", "--budget", "0 attempts", "--cache-len",
                                                "16", "--steps", "4", "--warmup", "1", "--out", str(tmp_path)], env)
    assert code == 0, stdout[-3000:]
    result = json.loads((tmp_path / "search_ablation-qwen3-1.7b-tiny.json").read_text())
    variants = result["variants"]
    assert list(variants) == ["none", "rules", "proposers", "both"]
    for name, row in variants.items():
        assert row["tokens_per_s"] > 0 and row["optimize_s"] >= 0 and isinstance(row["kernels"], list), name
    assert variants["none"]["kernels"] == [] and variants["none"]["optimize_s"] == 0
    assert variants["proposers"]["stop_reason"] == "budget spent: 0 attempts"
    rules, proposers = set(variants["rules"]["kernels"]), set(variants["proposers"]["kernels"])
    summary = result["summary"]
    assert summary["only_rules_reach"] == sorted(rules - proposers)
    assert summary["only_proposers_supply"] == sorted(proposers - rules)
    best = max(variants["rules"]["tokens_per_s"], variants["proposers"]["tokens_per_s"])
    assert summary["both_over_best_alone"] == pytest.approx(variants["both"]["tokens_per_s"] / best)


@pytest.mark.slow
def test_a_slice_writes_its_variants_alone_and_no_summary(tmp_path):
    code, stdout = run_main("search_ablation", ["--tiny", "--device", "cpu", "--variants", "none", "--cache-len", "16",
                                                "--steps", "4", "--warmup", "1", "--out", str(tmp_path)], {})
    assert code == 0, stdout[-3000:]
    result = json.loads((tmp_path / "search_ablation-qwen3-1.7b-tiny-none.json").read_text())
    assert list(result["variants"]) == ["none"] and result["summary"] is None


def _slice(folder, name, date, budget, **variants):
    data = {"benchmark": "search_ablation", "model": "m", "cache_len": 384, "batch": 1, "steps": 256,
            "budget": budget, "target": "NVIDIA H200", "device": "NVIDIA H200", "date": date,
            "variants": {k: {"kernels": kernels, "tokens_per_s": rate} for k, (kernels, rate) in variants.items()}}
    (folder / f"search_ablation-m-{name}.json").write_text(json.dumps(data))


def test_slices_merge_into_one_file_with_the_summary_and_disagreeing_slices_are_refused(tmp_path):
    from search_ablation import merge

    slices, out = tmp_path / "slices", tmp_path / "out"
    slices.mkdir()
    _slice(slices, "none_rules_proposers", "2026-12-04T10:00", "2 min", none=([], 300.0),
           rules=(["triton.rmsnorm"], 400.0), proposers=(["cute.linear"], 600.0))
    _slice(slices, "both", "2026-12-04T10:06", "2 min", both=(["cute.linear", "triton.rmsnorm"], 700.0))
    [path] = merge(slices, out)
    merged = json.loads(path.read_text())
    assert path.name == "search_ablation-m.json" and list(merged["variants"]) == ["none", "rules", "proposers", "both"]
    assert merged["summary"] == {"only_rules_reach": ["triton.rmsnorm"], "only_proposers_supply": ["cute.linear"],
                                 "both_over_best_alone": pytest.approx(700 / 600), "both_at_least_as_fast": True}
    assert [s["variants"] for s in merged["slices"]] == [["none", "rules", "proposers"], ["both"]]

    _slice(slices, "both", "2026-12-04T11:00", "4 min", both=([], 650.0))  # another budget: not one ablation
    with pytest.raises(SystemExit, match="differ in budget"):
        merge(slices, out)
