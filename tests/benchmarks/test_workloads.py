"""`benchmarks/workloads.py NAME`: each name reaches its script's main with its part and the arguments after it."""

import importlib

import pytest
import workloads


@pytest.mark.parametrize("name", list(workloads.WORKLOADS))
def test_each_name_runs_its_script_with_the_arguments_after_it(name, monkeypatch):
    script, fixed = workloads.WORKLOADS[name]
    module = importlib.import_module(script)
    seen = []
    monkeypatch.setattr(module, "main", lambda argv: seen.append(argv) or 7)
    assert workloads.main([name, "--tiny", "--device", "cpu"]) == 7  # the script's exit status
    assert seen == [[*fixed, "--tiny", "--device", "cpu"]]


def test_the_sdxl_names_pick_their_part():
    assert workloads.WORKLOADS["sdxl-unet"] == ("workload_sdxl", ["--part", "unet"])
    assert workloads.WORKLOADS["sdxl-vae"] == ("workload_sdxl", ["--part", "vae"])


def test_an_unknown_or_missing_name_says_what_there_is(capsys):
    assert workloads.main(["sdxl"]) == 2
    assert "sdxl-unet, sdxl-vae" in capsys.readouterr().err
    assert workloads.main([]) == 2
    out = capsys.readouterr().out
    assert all(name in out for name in workloads.WORKLOADS) and "workload_sdxl.py --part vae" in out
