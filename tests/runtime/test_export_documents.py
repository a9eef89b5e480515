"""Documents carry their kernels: hoid.save writes a non-library kernel's source into kernels/ beside the
document, hoid.load re-hashes it against the node's version; missing or altered -> a warning, or an error
with strict=True. Library kernels are not written (hoid holds them)."""

import pytest
import torch

import hoid
from hoid.ir import TensorType
from hoid.ir.ops.kernel import KernelImpl
from hoid.kernels import KernelSource, op_pattern, register
from hoid.kernels.documents import KernelFileError, KernelFileWarning, file_name

SOURCE = '''import torch

PARAMS = {"SCALE": (1,)}


def launch(x, out, *, SCALE=1):
    out.copy_(torch.relu(x) * SCALE)
'''


def _graph_with_source_kernel():
    source = KernelSource(SOURCE)
    spec = register(source.to_spec("test.doc_relu", op_pattern("relu")), replace=True)
    t = TensorType((2, 4), "f32")
    impl = KernelImpl(spec.id, spec.version, {"SCALE": 1}, op_pattern("relu").graph([t]), {})
    b = hoid.GraphBuilder("doc")
    x = b.input("x", (2, 4), "f32")
    return b.build(b.op("kernel", x, **impl.node_attrs())), source


def test_round_trip_writes_and_rechecks_the_kernel_file(tmp_path, recwarn):
    graph, source = _graph_with_source_kernel()
    hoid.save(graph, tmp_path / "doc.hoid")
    path = tmp_path / "kernels" / file_name("test.doc_relu", source.version)
    assert path.read_text() == SOURCE
    loaded = hoid.load(tmp_path / "doc.hoid", strict=True)
    assert loaded == graph
    assert not [w for w in recwarn if issubclass(w.category, KernelFileWarning)]
    x = torch.randn(2, 4)
    torch.testing.assert_close(hoid.compile(loaded, device="cpu")(x)[0], torch.relu(x))


def test_an_altered_or_missing_kernel_file_is_detected(tmp_path):
    graph, source = _graph_with_source_kernel()
    hoid.save(graph, tmp_path / "doc.hoid")
    path = tmp_path / "kernels" / file_name("test.doc_relu", source.version)
    path.write_text(SOURCE.replace("* SCALE", "* SCALE * 2"))
    with pytest.raises(KernelFileError, match="altered"):
        hoid.load(tmp_path / "doc.hoid", strict=True)
    with pytest.warns(KernelFileWarning, match="runs its body"):
        assert hoid.load(tmp_path / "doc.hoid") == graph
    path.unlink()
    with pytest.raises(KernelFileError, match="missing"):
        hoid.load(tmp_path / "doc.hoid", strict=True)


def test_library_kernels_are_not_written(tmp_path):
    from hoid.kernels import get

    spec = get("triton.rmsnorm")
    t, w = TensorType((2, 8), "f32"), TensorType((8,), "f32")
    impl = KernelImpl(spec.id, spec.version, {"rows_per_program": 1, "num_warps": 1},
                      op_pattern("rmsnorm").graph([t, w], {"eps": 1e-6}), {"eps": 1e-6})
    b = hoid.GraphBuilder("lib")
    x, wt = b.input("x", (2, 8), "f32"), b.input("w", (8,), "f32")
    hoid.save(b.build(b.op("kernel", x, wt, **impl.node_attrs())), tmp_path / "lib.hoid")
    assert not (tmp_path / "kernels").exists()


def _forget(monkeypatch, kernel_id):
    """As in a fresh process, where the document's kernel was never registered."""
    from hoid.kernels import registry

    monkeypatch.delitem(registry._KERNELS, kernel_id)
    assert kernel_id not in hoid.kernels.all_kernels()


def test_a_loaded_document_registers_its_kernels_and_compiles_with_them(tmp_path, monkeypatch, recwarn):
    from hoid.runtime import KernelFallbackWarning

    graph, source = _graph_with_source_kernel()
    hoid.save(graph, tmp_path / "doc.hoid")
    _forget(monkeypatch, "test.doc_relu")
    loaded = hoid.load(tmp_path / "doc.hoid", strict=True)
    spec = hoid.kernels.get("test.doc_relu")
    assert spec.version == source.version and spec.launch.source.path.endswith(file_name(spec.id, source.version))
    compiled = hoid.compile(loaded, device="cpu")
    assert not compiled.fallbacks and "k_" in compiled.source  # the kernel launches, not its body
    assert not [w for w in recwarn if issubclass(w.category, (KernelFileWarning, KernelFallbackWarning))]
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x)[0], torch.relu(x))
    # registered only where the document uses it: another signature is refused
    assert spec.rejects([TensorType((3, 4), "f32")], {}) is not None
    assert spec.rejects([TensorType((2, 4), "f32")], {}) is None


def test_a_document_not_trusted_or_refused_by_the_static_pass_registers_nothing(tmp_path, monkeypatch):
    from hoid.runtime import KernelFallbackWarning

    graph, _ = _graph_with_source_kernel()
    hoid.save(graph, tmp_path / "doc.hoid")
    _forget(monkeypatch, "test.doc_relu")
    hoid.load(tmp_path / "doc.hoid", register=False)
    assert "test.doc_relu" not in hoid.kernels.all_kernels()
    with pytest.warns(KernelFallbackWarning, match="test.doc_relu"):
        hoid.compile(hoid.load(tmp_path / "doc.hoid", register=False), device="cpu")

    sneaky = SOURCE.replace("    out.copy_(torch.relu(x) * SCALE)",
                            "    try:\n        out.copy_(torch.relu(x) * SCALE)\n"
                            "    except RuntimeError:\n        pass")
    spec = register(KernelSource(sneaky).to_spec("test.doc_try", op_pattern("relu")), replace=True)
    t = TensorType((2, 4), "f32")
    impl = KernelImpl(spec.id, spec.version, {"SCALE": 1}, op_pattern("relu").graph([t]), {})
    b = hoid.GraphBuilder("doc")
    hoid.save(b.build(b.op("kernel", b.input("x", (2, 4), "f32"), **impl.node_attrs())), tmp_path / "try.hoid")
    _forget(monkeypatch, "test.doc_try")
    with pytest.raises(KernelFileError, match="static pass.*try"):
        hoid.load(tmp_path / "try.hoid", strict=True)
    with pytest.warns(KernelFileWarning, match="static pass"):
        hoid.load(tmp_path / "try.hoid")
    assert "test.doc_try" not in hoid.kernels.all_kernels()
