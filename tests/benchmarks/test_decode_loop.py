"""benchmarks/decode_loop.py: the one loop, on a fake decoder whose every call is recorded."""

import pytest
import torch
from decode_loop import Decoder, Shape, Skip, measure, run_row, teacher_forced, tokens_per_second

VOCAB = 50


class Counter:
    """Next token = (input + position) % VOCAB; logits one-hot at that token. Records each call."""

    def __init__(self):
        self.calls = []

    def _next(self, ids, pos):
        return (ids[:, -1:] + pos + ids.shape[1] - 1) % VOCAB

    def prefill(self, ids, pos):
        self.calls.append(("prefill", ids.shape[1], int(pos)))
        return self._next(ids, pos)

    def step(self, token, pos):
        assert token.shape[1] == 1 and token.is_contiguous()
        self.calls.append(("step", int(token[0, 0]), int(pos)))
        return self._next(token, pos)

    def logits(self, token, pos, kind):
        out = torch.zeros(token.shape[0], VOCAB)
        out.scatter_(1, (self.prefill if kind == "p" else self.step)(token, pos), 1.0)
        return out

    def decoder(self):
        return Decoder(prefill=self.prefill, step=self.step, prefill_logits=lambda i, p: self.logits(i, p, "p"),
                       step_logits=lambda t, p: self.logits(t, p, "s"))


def test_measure_feeds_each_token_back_at_the_next_position():
    fake = Counter()
    prompt = torch.tensor([[1, 2, 3], [4, 5, 6]])
    figures, tokens = measure(fake.decoder(), prompt, 5, warmup=2, ttft_repeats=3)
    assert tokens.shape == (2, 5)
    # token 0 from the prefill (last prompt token + slot 2), then token i = token i-1 + slot (3 + i - 1)
    expected = [(3 + 2) % VOCAB]
    for i in range(1, 5):
        expected.append((expected[-1] + 3 + i - 1) % VOCAB)
    assert tokens[0].tolist() == expected
    timed = fake.calls[-4:]  # the timed decode: 4 steps at positions 3..6
    assert [c[2] for c in timed] == [3, 4, 5, 6] and [c[1] for c in timed] == expected[:4]
    assert [c[0] for c in fake.calls].count("prefill") == 1 + 3  # warm-up, then the TTFT repeats
    assert figures["tokens_per_s"] == pytest.approx(2 * figures["steps_per_s"])
    assert figures["steps_per_s"] == pytest.approx(4 / figures["decode_s"])


def test_teacher_forcing_feeds_the_given_tokens_not_the_predictions():
    fake = Counter()
    prompt = torch.tensor([[1, 2, 3]])
    given = torch.tensor([[7, 8, 9, 10]])
    seen = []
    teacher_forced(fake.decoder(), prompt, given, lambda i, logits: seen.append((i, int(logits.argmax()))))
    assert [c[1:] for c in fake.calls if c[0] == "step"] == [(7, 3), (8, 4), (9, 5)]
    assert seen == [(0, 5), (1, 10), (2, 12), (3, 14)]


def test_a_decoder_without_logits_cannot_be_gated():
    fake = Counter()
    with pytest.raises(ValueError, match="cannot be gated"):
        teacher_forced(Decoder(fake.prefill, fake.step), torch.ones((1, 2), dtype=torch.long),
                       torch.ones((1, 2), dtype=torch.long), lambda i, x: None)


def test_rows_record_skips_errors_and_what_the_decoder_says():
    prompt = torch.tensor([[1, 2]])

    def skip():
        raise Skip("needs CUDA: a CUDA graph")

    def broken():
        raise RuntimeError("boom")

    closed = []

    def fine():
        fake = Counter()
        return Decoder(fake.prefill, fake.step, info={"mode": "x"}, describe=lambda: {"calls": len(fake.calls)},
                       close=lambda: closed.append(True))

    assert run_row("s", "S", "stock", skip, prompt, 3) | {"row_s": 0} == {
        "key": "s", "name": "S", "group": "stock", "start_bytes": None, "status": "skipped",
        "reason": "needs CUDA: a CUDA graph", "row_s": 0}
    row = run_row("b", "B", "stock", broken, prompt, 3)
    assert row["status"] == "error" and row["reason"] == "RuntimeError: boom"
    seen = []
    row = run_row("f", "F", "hoid", fine, prompt, 3, warmup=1, after=lambda d, r, t: seen.append(t.tolist()))
    assert row["status"] == "ok" and row["mode"] == "x" and row["calls"] == 1 + 1 + 11 + 2 and closed == [True]
    assert seen == [[[3, 5, 8]]] and row["row_s"] >= row["decode_s"]


def test_shape_sizes_the_cache_to_prompt_and_new_tokens():
    shape = Shape(128, 256, 8)
    assert shape.cache_len == 384 and shape.key == "p128-n256-b8"


def test_a_step_alone_is_timed_over_the_tokens_asked_for():
    positions = []

    def step(token, pos):
        positions.append(int(pos))
        return token + 1

    assert tokens_per_second(step, 5, warmup=2, device="cpu") > 0
    # warm-up (position 0, then 1, 2), the "prefill" again at 0, then the 5 timed steps at 1..5
    assert positions == [0, 1, 2, 0, 1, 2, 3, 4, 5]


def test_the_optimize_log_ends_with_what_was_skipped_and_what_the_budget_left_untried(capsys):
    from types import SimpleNamespace

    from decode_loop import OptimizeLog

    log = OptimizeLog("step")
    log({"kind": "region skipped", "proposer": "codegen"})
    log({"kind": "baseline", "seconds": 0.5})
    log.summary(SimpleNamespace(unreached=["codegen: no turn (budget spent: 1 minutes)"]))
    out = capsys.readouterr().out
    assert "optimize step: baseline: seconds=0.5" in out and "region skipped" not in out
    assert "optimize step: 1 regions skipped by codegen" in out
    assert out.rstrip().endswith("optimize step: not reached: codegen: no turn (budget spent: 1 minutes)")


def test_a_phase_that_stalls_writes_where_it_is_and_a_quick_one_writes_nothing(monkeypatch, capfd):
    import time

    import decode_loop

    monkeypatch.setattr(decode_loop, "STALL_S", 0.3)

    def waits_in_here():
        time.sleep(0.8)

    with decode_loop.phase("outer"):
        with decode_loop.phase("quick"):
            pass
        waits_in_here()  # the outer phase is watched again once the inner one has ended
    err = capfd.readouterr().err
    assert "most recent call first" in err and "waits_in_here" in err
    with decode_loop.phase("quick"):
        pass
    time.sleep(0.5)  # nothing armed after the last phase
    assert "most recent call first" not in capfd.readouterr().err


def test_a_phase_runs_where_stderr_has_no_file_descriptor(monkeypatch):
    """A caller that captured stderr in memory (decode.py's tests do) still runs its phases."""
    import io

    import decode_loop

    monkeypatch.setattr("sys.stderr", io.StringIO())
    with decode_loop.phase("captured"):
        pass


def test_every_benchmark_refuses_a_budget_hoid_would_refuse_before_it_runs_a_row(capsys):
    """Found at the hoid row, after the stock rows, a wrong budget had cost a GPU call five minutes."""
    import decode_args
    import workload_sdxl

    assert workload_sdxl.parse(["--optimize-budget", "5m30s"]).optimize_budget == "5m30s"
    for parse in (workload_sdxl.parse, lambda argv: decode_args.parse(["qwen3-1.7b", *argv])):
        with pytest.raises(SystemExit):
            parse(["--optimize-budget", "5mx"])
        assert "expected e.g." in capsys.readouterr().err
