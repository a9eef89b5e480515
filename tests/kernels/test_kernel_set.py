"""KernelSet and its store: the kernels a search may use, and the acceptances kept per device."""

import pytest

from hoid.ir import TensorType
from hoid.kernels import AcceptedStore, KernelSet, KernelSpec, op_pattern
from hoid.kernels.kernel_set import Accepted

X, W = TensorType((2, 8), "f32"), TensorType((8,), "f32")


def _spec(kernel_id="test.norm", source_tag=""):
    def launch(x, w, out, *, eps):  # the tag changes the source, so the version
        out.copy_(x)

    return KernelSpec(kernel_id, op_pattern("rmsnorm", 2), "torch", launch=launch,
                      source=f"def launch(): pass  # {kernel_id} {source_tag}")


def test_the_default_set_is_the_built_in_library_alone():
    from hoid.kernels import library_kernels

    default = KernelSet.default()
    assert {s.id for s in default} == set(library_kernels()) and "triton.rmsnorm" in default
    rmsnorm = default["triton.rmsnorm"]
    assert rmsnorm.launch.__module__.startswith("hoid.kernels.library")
    assert default.allows(rmsnorm, [X, W], {"eps": 1e-6}) is None
    assert "not in this kernel set" in default.allows(_spec("triton.rmsnorm"), [X, W], {"eps": 1e-6})


def test_an_accepted_kernel_is_allowed_only_at_its_signature():
    spec = _spec()
    kernels = KernelSet.empty().accept(spec, [X, W], {"eps": 1e-6})
    assert kernels.allows(spec, [X, W], {"eps": 1e-6}) is None
    assert "other input types" in kernels.allows(spec, [TensorType((3, 8), "f32"), W], {"eps": 1e-6})
    assert "other input types" in kernels.allows(spec, [X, W], {"eps": 1e-5})
    assert "not in this kernel set" in KernelSet.empty().allows(spec, [X, W], {"eps": 1e-6})


def test_a_set_holds_one_version_of_a_kernel():
    with pytest.raises(ValueError, match="one version"):
        KernelSet.empty().accept(_spec(), [X, W]).accept(_spec(source_tag="v2"), [W, W])


def test_the_store_keeps_acceptances_per_device(tmp_path):
    spec = _spec()
    with AcceptedStore(tmp_path / "k.sqlite") as store:
        store.save("NVIDIA H200", Accepted(spec, (X, W), {"eps": 1e-6}, {"rows": 2}))
        found = store.load("NVIDIA H200", resolve=lambda kernel_id, source, entry, rebuild: spec)
        assert [(a.spec.id, a.types, a.attrs, a.params) for a in found.current] == [
            ("test.norm", (X, W), {"eps": 1e-6}, {"rows": 2})]
        assert found.kernel_set(KernelSet.empty()).allows(spec, [X, W], {"eps": 1e-6}) is None
        assert store.load("NVIDIA B200", resolve=lambda *a: spec).current == []


def test_a_changed_kernel_comes_back_stale_and_modelled_evidence_is_never_stored(tmp_path):
    with AcceptedStore(tmp_path / "k.sqlite") as store:
        store.save("NVIDIA H200", Accepted(_spec(), (X, W), {"eps": 1e-6}))
        found = store.load("NVIDIA H200", resolve=lambda *a: _spec(source_tag="edited"))
        assert found.current == [] and "now at" in found.stale[0][1]
        with pytest.raises(ValueError, match="provisional"):
            store.save("NVIDIA H200", Accepted(_spec(), (X, W), evidence="modelled"))


def test_runnable_here_drops_cute_kernels_without_cute_dsl(monkeypatch):
    import hoid.kernels.library._cute_compile as cute

    monkeypatch.setattr(cute, "have_cute", lambda: False)
    here = KernelSet.default().runnable_here()
    assert "triton.linear" in here and not any(s.backend == "cute" for s in here)
    assert any(s.backend == "cute" for s in KernelSet.default())


def test_runnable_here_drops_cute_kernels_without_a_gpu(monkeypatch):
    import torch

    import hoid.kernels.library._cute_compile as cute

    monkeypatch.setattr(cute, "have_cute", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert not any(s.backend == "cute" for s in KernelSet.default().runnable_here())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert any(s.backend == "cute" for s in KernelSet.default().runnable_here())


def test_a_generated_kernel_comes_back_from_the_store_rebuilt_and_runs(tmp_path):
    """On the H100 (12-05) every generated kernel a run had accepted came back stale in the next process ("not
    registered"), was generated and checked again, and the torch.compile backend never used one."""
    from hoid.ir import GraphBuilder
    from hoid.kernels import all_kernels
    from hoid.kernels.codegen import generate
    from hoid.kernels.launch import resolve_params
    from hoid.measure.inputs import random_inputs

    from .library.reference import assert_matches

    b = GraphBuilder("bias_gelu")
    h, bias = b.input("h", (6, 48), "f32"), b.input("bias", (48,), "f32")
    gen = generate(b.build(b.gelu(b.add(h, bias))))
    types = tuple(gi.value.type for gi in gen.body.inputs)
    params = resolve_params(gen.spec, types, {}, gen.spec.default_params(), "sm_90")
    assert gen.spec.id not in all_kernels()  # generated, never checked here: as in a fresh process
    with AcceptedStore(tmp_path / "k.sqlite") as store:
        store.save("NVIDIA H200", Accepted(gen.spec, types, {}, params))
    with AcceptedStore(tmp_path / "k.sqlite") as store:  # reopened: what a later process reads
        found = store.load("NVIDIA H200")
    assert found.stale == []
    [accepted] = found.current
    assert accepted.spec.id == gen.spec.id and accepted.spec.version == gen.spec.version
    assert all_kernels()[gen.spec.id] is accepted.spec  # registered: the runtime binds kernel nodes by id
    assert accepted.params == params and accepted.types == types
    assert_matches(accepted.spec, random_inputs(list(types), seed=1), {}, params)


def test_a_store_written_before_regions_were_kept_opens_and_its_rows_load(tmp_path):
    import sqlite3

    db = sqlite3.connect(tmp_path / "old.sqlite")
    db.execute("create table accepted (device text not null, kernel text not null, types text not null, "
               "attrs text not null, version text not null, params text not null, source text, entry text, "
               "primary key (device, kernel, types, attrs))")
    db.commit()
    db.close()
    spec = _spec()
    with AcceptedStore(tmp_path / "old.sqlite") as store:
        store.save("NVIDIA H200", Accepted(spec, (X, W), {"eps": 1e-6}))
        [found] = store.load("NVIDIA H200", resolve=lambda *a: spec).current
    assert found.spec is spec


def test_a_rebuilt_kernel_keeps_its_in_place_output_and_its_pdl(tmp_path):
    """An in-place kernel rebuilt without its aliases would write a fresh buffer where the original wrote into
    its input (a cache updated at one position would lose the rest)."""
    from hoid.kernels.loader import KernelSource
    from hoid.kernels.pattern import op_pattern

    text = ("import torch\nimport triton\n\n\ndef launch(x, out, *, pdl=False):  # Triton's in name only\n"
            "    out.copy_(x.exp())\n")
    spec = KernelSource(text).to_spec("test.exp_in_place", op_pattern("exp", 1), aliases=((0, 0),), pdl=True,
                                      pdl_early=(0,))
    x = TensorType((4, 8), "f32")
    with AcceptedStore(tmp_path / "k.sqlite") as store:
        store.save("NVIDIA H200", Accepted(spec, (x,), {}, {}))
        [found] = store.load("NVIDIA H200").current
    assert found.spec is not spec and found.spec.version == spec.version
    assert (found.spec.aliases, found.spec.pdl, found.spec.pdl_early) == (((0, 0),), True, (0,))


def test_a_row_that_no_longer_rebuilds_comes_back_stale_with_why_and_the_others_load(tmp_path):
    from hoid.kernels.loader import KernelSource
    from hoid.kernels.pattern import op_pattern

    def source_spec(name):
        text = f"import torch\n\n\ndef launch(x, out):  # {name}\n    out.copy_(x.exp())\n"
        return KernelSource(text).to_spec(name, op_pattern("exp", 1))

    x = TensorType((4, 8), "f32")
    with AcceptedStore(tmp_path / "k.sqlite") as store:
        for name in ("test.exp_broken", "test.exp_whole"):
            store.save("NVIDIA H200", Accepted(source_spec(name), (x,), {}, {}))
        store.db.execute("update accepted set rebuild = '{not json' where kernel = 'test.exp_broken'")
        found = store.load("NVIDIA H200")
    assert [a.spec.id for a in found.current] == ["test.exp_whole"]
    [(kernel, why)] = found.stale
    assert kernel == "test.exp_broken"
    assert why.startswith("its kernel could not be rebuilt from the store (JSONDecodeError")
