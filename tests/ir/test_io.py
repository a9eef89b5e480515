"""`hoid.save` / `hoid.load`: the document and its weights on disk, back bit for bit."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings

import hoid
from hoid.ir.io import WeightsFileError, weights_path
from tests.ir.graph_strategies import assert_same_outcome, graph_cases


def model_graph() -> hoid.Graph:
    """A small layer with weights of several dtypes, two of them tied (sharing one tensor)."""
    gen = torch.Generator().manual_seed(0)
    embed = torch.randn(16, 8, generator=gen)
    b = hoid.GraphBuilder("layer")
    x = b.input("x", (4, 8), "f32")
    w_in = b.weight("model.embed.weight", (16, 8), "f32", embed)
    w_out = b.weight("model.lm_head.weight", (16, 8), "f32", embed)  # tied to the embedding
    norm = b.weight("model.norm.weight", (8,), "bf16", torch.randn(8, generator=gen).to(torch.bfloat16))
    scale = b.weight("model.scale", (8,), "f16", torch.randn(8, generator=gen).to(torch.float16))
    h = b.rmsnorm(b.mul(x, scale), b.cast(norm, dtype="f32"), eps=1e-6)
    logits = b.matmul(h, b.transpose(w_out, dim0=0, dim1=1))
    return b.build(logits, b.matmul(h, b.transpose(w_in, dim0=0, dim1=1)))


def assert_same_weights(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for name, tensor in want.items():
        assert got[name].dtype == tensor.dtype and torch.equal(got[name], tensor), name


def test_save_writes_the_document_and_its_weights_beside_it(tmp_path):
    graph = model_graph()
    hoid.save(graph, tmp_path / "layer.hoid")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["layer.hoid", "layer.safetensors"]
    text = (tmp_path / "layer.hoid").read_text()
    assert text.splitlines()[:2] == ["hoid 1", 'weights "layer.safetensors"']
    assert hoid.loads(text) == graph  # the document alone is the graph, unbound


def test_load_binds_the_weights_and_runs_bit_exactly(tmp_path):
    graph = model_graph()
    hoid.save(graph, tmp_path / "layer.hoid")
    loaded = hoid.load(tmp_path / "layer.hoid")
    assert loaded == graph
    assert_same_weights(loaded.weights, graph.weights)
    x = torch.randn(4, 8)
    for got, want in zip(hoid.run(loaded, x), hoid.run(graph, x), strict=True):
        assert torch.equal(got, want)


def test_a_graph_without_bound_weights_writes_no_weights_file(tmp_path):
    b = hoid.GraphBuilder()
    graph = b.build(b.mul(b.input("x", (2,), "f32"), b.weight("w", (2,), "f32")))
    hoid.save(graph, tmp_path / "g.hoid")
    assert [p.name for p in tmp_path.iterdir()] == ["g.hoid"]
    assert (tmp_path / "g.hoid").read_text() == hoid.dumps(graph)
    loaded = hoid.load(str(tmp_path / "g.hoid"))
    assert loaded == graph and loaded.weights == {}


def test_a_missing_weights_file_is_a_clear_error(tmp_path):
    hoid.save(model_graph(), tmp_path / "layer.hoid")
    (tmp_path / "layer.safetensors").unlink()
    with pytest.raises(WeightsFileError, match=r"'layer.safetensors'.*does not exist; copy the weights") as e:
        hoid.load(tmp_path / "layer.hoid")
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, hoid.HoidError)


def test_a_renamed_document_still_finds_its_weights(tmp_path):
    graph = model_graph()
    hoid.save(graph, tmp_path / "layer.hoid")
    (tmp_path / "layer.hoid").rename(tmp_path / "renamed.hoid")
    assert_same_weights(hoid.load(tmp_path / "renamed.hoid").weights, graph.weights)


def test_weights_that_do_not_match_the_document_are_refused(tmp_path):
    from safetensors.torch import save_file

    hoid.save(model_graph(), tmp_path / "layer.hoid")
    save_file({"model.norm.weight": torch.zeros(8)}, str(tmp_path / "layer.safetensors"))  # f32, not bf16
    with pytest.raises(hoid.GraphError, match=r"does not match .*layer.hoid.*model.norm.weight.*bf16"):
        hoid.load(tmp_path / "layer.hoid")
    save_file({"stray": torch.zeros(8)}, str(tmp_path / "layer.safetensors"))
    with pytest.raises(hoid.GraphError, match="stray.*does not declare"):
        hoid.load(tmp_path / "layer.hoid")


def test_save_refuses_an_invalid_graph(tmp_path):
    graph = model_graph()
    graph.weights["model.scale"] = torch.zeros(3, dtype=torch.float16)
    with pytest.raises(hoid.GraphError, match="model.scale"):
        hoid.save(graph, tmp_path / "layer.hoid")
    assert not any(tmp_path.iterdir())


def test_a_malformed_file_reports_its_line(tmp_path):
    path = tmp_path / "bad.hoid"
    path.write_text("hoid 1\ngraph @main\ninput %x : f32[2]\n%y = exq(%x) : f32[2]\noutput %y\nend\n")
    with pytest.raises(hoid.ParseError, match="unknown op 'exq'") as e:
        hoid.load(path)
    assert e.value.line == 4


def test_a_document_may_not_take_the_weights_suffix():
    with pytest.raises(ValueError, match="name it .hoid"):
        weights_path("model.safetensors")
    assert weights_path("out/decode.hoid") == Path("out/decode.safetensors")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph_cases())
def test_random_graphs_survive_save_and_load(case):
    with tempfile.TemporaryDirectory() as tmp:  # not tmp_path: one directory per hypothesis example
        hoid.save(case.graph, Path(tmp) / "g.hoid")
        loaded = hoid.load(Path(tmp) / "g.hoid")
    assert loaded == case.graph
    assert_same_weights(loaded.weights, case.graph.weights)  # partially bound graphs stay partial
    assert_same_outcome(case.outcome(loaded), case.outcome(case.graph))


def test_a_save_that_fails_midway_leaves_no_truncated_or_temporary_file(tmp_path, monkeypatch):
    import hoid.ir.io as io_module

    b = hoid.GraphBuilder("g")
    w = b.weight("w", (3,), "f32", torch.ones(3))
    graph = b.build(b.neg(w))
    hoid.save(graph, tmp_path / "g.hoid")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(io_module, "format_document", broken)
    graph.weights = {"w": torch.zeros(3)}
    with pytest.raises(OSError, match="disk full"):
        hoid.save(graph, tmp_path / "g.hoid")
    monkeypatch.undo()
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert set(after) == set(before)  # no temporary file left behind
    assert after["g.hoid"] == before["g.hoid"]
