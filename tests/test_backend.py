"""`torch.compile(model, backend="hoid")` (hoid/backend.py): outputs, the entry point, fallbacks, shapes."""

import logging
import pathlib
import subprocess
import sys
import tomllib

import pytest
import torch

import hoid.backend as hb

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """A store of accepted kernels of this test's own (never the user's), fresh dynamo caches, and the
    log-once memory cleared so that each test sees its own reasons."""
    monkeypatch.setenv("HOID_KERNELS", str(tmp_path / "kernels.sqlite"))
    monkeypatch.setattr(hb, "_logged", set())
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _recording():
    """The hoid backend, keeping every `HoidCallable` it returns (one per subgraph dynamo captured)."""
    made = []

    def backend(gm, example_inputs):
        made.append(hb.backend(gm, example_inputs))
        return made[-1]

    return backend, made


class MLP(torch.nn.Module):
    def __init__(self, width=16):
        super().__init__()
        torch.manual_seed(0)
        self.up, self.down = torch.nn.Linear(width, 2 * width), torch.nn.Linear(2 * width, width)
        self.register_buffer("scale", torch.full((width,), 0.5))

    def forward(self, x):
        return self.down(torch.nn.functional.silu(self.up(x))) * self.scale + x


def test_tiny_zoo_model_gives_its_outputs():
    from hoid.models import build_model

    lm = build_model("qwen3-1.7b-tiny")
    backend, made = _recording()
    compiled = torch.compile(lm, backend=backend)
    ids = torch.randint(0, lm.config.vocab_size, (1, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected, got = lm(ids).logits, compiled(ids).logits
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    entries = [e for c in made for e in c.compiled.values()]
    assert entries and all(e is not None for e in entries), [c.reasons for c in made]
    ops = entries[0].graph.op_counts()
    # rewritten, not merely imported: the rule sets recognised RMSNorm and RoPE from their decomposed forms
    assert ops.get("rmsnorm", 0) == 9 and ops.get("rope", 0) == 4, ops
    # the weights are bound to the graph (not passed per call): the only runtime input is the token ids
    assert [tuple(v.type.shape) for v in entries[0].graph.runtime_inputs] == [(1, 7)]


def _dist_info(tmp_path) -> pathlib.Path:
    """An installed distribution's metadata holding pyproject.toml's entry points, as `pip install` writes
    it. The venv's hoid is an editable install of another checkout, made before the entry point existed;
    this one, first on the path beside this checkout, is what importlib.metadata finds."""
    groups = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    dist = tmp_path / "site" / "hoid_entry_point_check-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hoid-entry-point-check\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) for group, eps in groups.items()))
    return dist.parent


FRESH = """
import logging, sys, torch
logging.basicConfig()  # a fallback would say so on stderr
assert not any(m == "hoid" or m.startswith("hoid.") for m in sys.modules)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.SiLU(), torch.nn.Linear(8, 4)).eval()
x = torch.randn(3, 8)
with torch.no_grad():
    got, expected = torch.compile(model, backend="hoid")(x), model(x)
torch.testing.assert_close(got, expected)
from torch._dynamo.backends.registry import lookup_backend
fn = lookup_backend("hoid")
print(fn.__module__, sys.modules[fn.__module__].__file__)
print("agent loaded:", any(m.startswith("hoid.agent") for m in sys.modules))
"""


def test_the_entry_point_is_found_by_a_process_that_never_imported_hoid(tmp_path):
    site = _dist_info(tmp_path)
    env = {"PYTHONPATH": f"{site}:{ROOT}", "HOID_KERNELS": str(tmp_path / "k.sqlite"), "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    where, agent = run.stdout.strip().splitlines()[-2:]
    module, path = where.split()
    assert module == "hoid.backend" and pathlib.Path(path) == ROOT / "hoid" / "backend.py"
    assert agent == "agent loaded: False"  # the backend never imports the agent (docs/design.md)
    assert "hoid.backend" not in run.stderr, run.stderr[-3000:]  # hoid ran it: no fallback was logged


class SinhTail(torch.nn.Module):
    """A supported subgraph, a graph break, then a subgraph with sinh (an op hoid has no lowering for)."""

    def __init__(self):
        super().__init__()
        self.mlp = MLP()

    def forward(self, x):
        y = self.mlp(x)
        torch._dynamo.graph_break()
        return torch.sinh(y) * 2


def test_an_op_hoid_lacks_falls_back_for_its_subgraph_with_the_reason_logged_once(caplog):
    model = SinhTail().eval()
    backend, made = _recording()
    compiled = torch.compile(model, backend=backend)
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="hoid.backend"):
        for seed in (0, 1):
            x = torch.randn(4, 16, generator=torch.Generator().manual_seed(seed))
            torch.testing.assert_close(compiled(x), model(x))
    assert len(made) == 2  # the graph break: two subgraphs
    first, second = ([e is not None for e in c.compiled.values()] for c in made)
    assert first == [True] and second == [False]  # only the subgraph with sinh runs eagerly
    reasons = [r.getMessage() for r in caplog.records if r.name == "hoid.backend"]
    assert len(reasons) == 1 and "aten.sinh.default" in reasons[0], reasons


@pytest.mark.parametrize("dynamic", [False, None])
def test_a_new_shape_compiles_again_and_stays_correct(dynamic):
    """dynamic=False: dynamo recompiles per shape; None (the default): the second shape arrives as one
    graph over a SymInt, which hoid specialises per call signature."""
    model = MLP().eval()
    backend, made = _recording()
    compiled = torch.compile(model, backend=backend, dynamic=dynamic)
    with torch.no_grad():
        for rows in (2, 3, 5, 3):
            x = torch.randn(rows, 16, generator=torch.Generator().manual_seed(rows))
            torch.testing.assert_close(compiled(x), model(x))
    shapes = sorted(tuple(e.graph.runtime_inputs[0].type.shape) for c in made for e in c.compiled.values())
    assert shapes == [(2, 16), (3, 16), (5, 16)]  # each shape compiled once, the repeat reused


def test_past_the_signature_limit_a_subgraph_runs_eagerly(monkeypatch, caplog):
    monkeypatch.setattr(hb, "MAX_SIGNATURES", 1)
    model = MLP().eval()
    backend, made = _recording()
    compiled = torch.compile(model, backend=backend, dynamic=True)
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="hoid.backend"):
        for rows in (2, 3):
            x = torch.randn(rows, 16)
            torch.testing.assert_close(compiled(x), model(x))
    assert [e is not None for c in made for e in c.compiled.values()] == [True, False]
    assert any("more than 1 input signatures" in r.getMessage() for r in caplog.records)


def test_with_autograd_recording_the_model_runs_eagerly_and_keeps_its_gradients():
    model = MLP()
    compiled = torch.compile(model, backend=hb.backend)
    x = torch.randn(2, 16)
    out = compiled(x)
    assert out.grad_fn is not None
    torch.testing.assert_close(out, model(x))


class Accumulator(torch.nn.Module):
    """Mutates its own buffer in place, as a KV cache update does."""

    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(4, 8))

    def forward(self, x):
        self.total.add_(x)
        return self.total * 2


def test_a_buffer_the_graph_mutates_is_updated_in_the_model():
    model, reference = Accumulator(), Accumulator()
    backend, made = _recording()
    compiled = torch.compile(model, backend=backend)
    with torch.no_grad():
        for seed in range(3):
            x = torch.randn(4, 8, generator=torch.Generator().manual_seed(seed))
            torch.testing.assert_close(compiled(x), reference(x))
    torch.testing.assert_close(model.total, reference.total)
    entry = next(iter(made[0].compiled.values()))
    assert entry is not None and [v.name for v in entry.graph.inputs_of_kind("state")]  # imported as state
