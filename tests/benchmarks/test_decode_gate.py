"""benchmarks/decode_gate.py: a gate over several sequences pools their steps, refuses sequences of another
shape, and survives decode.py's gate file only for the prompts and weights it was made for."""


import pytest
import torch

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def lm():
    from hoid.models import build_model

    torch.manual_seed(0)
    return build_model("qwen3-1.7b-tiny").eval()


def _eager(lm):
    import decode_stock
    from decode_loop import Shape

    return decode_stock.hf_eager(lm, Shape(prompt=6, new=5, batch=1), decode_stock.Context(torch.device("cpu")))


def _prompt(seed: int, vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (1, 6), generator=torch.Generator().manual_seed(seed))


@torch.no_grad()
def test_a_gate_pools_the_steps_of_its_sequences(lm):
    from decode_gate import Gate
    from decode_loop import measure

    eager, vocab = _eager(lm), lm.config.vocab_size
    prompts = [_prompt(s, vocab) for s in (1, 2)]
    _, tokens = measure(eager, torch.cat(prompts), 5, warmup=0, ttft_repeats=1)
    gate = Gate(lm, prompts[0], tokens[:1])
    one = gate.set_baseline(eager)
    gate.add(prompts[1], tokens[1:])
    assert gate.baseline is None  # taken over one sequence, it no longer covers the gate
    both = gate.set_baseline(eager)
    assert (one["samples"], both["samples"]) == (5, 10)
    assert all(r.device.type == "cpu" and r.shape == (5, 1, vocab) for _, _, r in gate.sequences)
    # eager judged against its own baseline: the same figures, so it passes
    row = {}
    gate.judge(eager, row)
    assert row["gate"]["passed"] and row["gate"]["sequences"] == 2 and row["failed"] is False
    with pytest.raises(ValueError, match="share one shape"):
        gate.add(torch.cat(prompts), tokens)


@torch.no_grad()
def test_the_gate_file_is_for_its_prompts_and_weights_only(lm, tmp_path):
    from decode_gate import Gate, add_sequences, gate_prompts, load_gate, save_gate
    from decode_loop import Shape, measure

    shape = Shape(prompt=6, new=5, batch=1)
    prompts = [_prompt(9, lm.config.vocab_size), *gate_prompts(15, shape, lm.config.vocab_size, 0, "cpu")]
    assert len(prompts) == 3  # ceil(15 / 5)
    eager = _eager(lm)
    _, tokens = measure(eager, prompts[0], 5, warmup=0, ttft_repeats=1)
    gate = Gate(lm, prompts[0], tokens)
    add_sequences(gate, eager, prompts[1:], shape)  # their teacher tokens from one batched eager generation
    _, together = measure(eager, torch.cat(prompts[1:]), 5, warmup=0, ttft_repeats=1)
    assert [torch.equal(t, together[i:i + 1]) for i, (_, t, _) in enumerate(gate.sequences[1:])] == [True, True]
    path = tmp_path / "gate.pt"
    gate.set_baseline(eager)
    save_gate(path, lm, gate)

    loaded = load_gate(path, lm, prompts)
    assert loaded.baseline == gate.baseline and len(loaded.sequences) == 3
    assert all(torch.equal(a[1], b[1]) and torch.equal(a[2], b[2]) for a, b in zip(loaded.sequences, gate.sequences))
    other = [prompts[0], prompts[1], _prompt(10, lm.config.vocab_size)]
    assert load_gate(path, lm, other) is None  # one prompt differs
    assert load_gate(path, lm, prompts[:2]) is None  # fewer sequences asked for
    lm.lm_head.weight[0, 0] += 1  # other weights
    try:
        assert load_gate(path, lm, prompts) is None
    finally:
        lm.lm_head.weight[0, 0] -= 1
