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
