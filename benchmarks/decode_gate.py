"""The correctness gate of `benchmarks/decode.py`, over `hoid.testing.gate`'s arithmetic.

The tokens are those transformers' eager model generated (the `hf-eager` row, and for the gate's further
sequences the same eager decoder). The reference is a float32 copy of the same weights (the bfloat16 values,
upcast) run once over prompt + tokens: with teacher forcing, one causal forward gives the logits of every
step. Eager bfloat16's own errors (teacher-forced through the `hf-eager` decoder) are the bar each hoid row is
judged by.

A gate holds one or more sequences (`add`): each is teacher-forced through the row under test at the
row's own batch, and their steps pool into one set of samples. Why more than one: top-1 agreement over 256
samples moves 0.39 points per token, and two bf16 programs that round differently disagree with the
reference on different near-tie tokens; measured on the H200 (Qwen3-1.7B p128 b1), two hoid rows whose
median and p99 errors were below eager's fell short of eager's top-1 by 3 tokens of 256 (1.2 points, the
one-point slack being 2.6 tokens). `decode.py --gate-samples` sets how many samples the criterion is read
over. The reference logits are kept on the host: held on the GPU they would count in every row's peak memory.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from decode_loop import Decoder, Shape, measure, progress, release, result_name, teacher_forced

from hoid.ir.io import replace_atomically  # the one write-then-rename
from hoid.testing.gate import Stats, StepErrors, judge


def reference_logits(lm, prompt: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Float32 logits [N, B, V] predicting each of `tokens`' N positions, teacher-forced."""
    reference = copy.deepcopy(lm).float()
    sequence = torch.cat([prompt, tokens[:, :-1]], dim=1)
    hidden = reference.model(input_ids=sequence, use_cache=False).last_hidden_state[:, prompt.shape[1] - 1:]
    logits = reference.lm_head(hidden).float().transpose(0, 1).contiguous()
    del reference, hidden
    release(prompt.device)
    return logits


class Gate:
    """Sequences (prompt i64[B, P], teacher tokens i64[B, N], float32 reference [N, B, V] on the host) and the
    eager baseline over all of them. Subclasses with another reference override `reference`."""

    def __init__(self, lm, prompt: torch.Tensor, tokens: torch.Tensor):
        self.lm = lm
        self.sequences: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self.baseline: Stats | None = None
        self.add(prompt, tokens)

    def reference(self, prompt: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        return reference_logits(self.lm, prompt, tokens)

    def add(self, prompt: torch.Tensor, tokens: torch.Tensor) -> None:
        """One more sequence; a baseline taken before it no longer covers the gate and is dropped."""
        if self.sequences and (prompt.shape != self.prompt.shape or tokens.shape != self.sequences[0][1].shape):
            raise ValueError(f"a gate's sequences share one shape: prompt {tuple(prompt.shape)} and tokens "
                             f"{tuple(tokens.shape)} against {tuple(self.prompt.shape)} and "
                             f"{tuple(self.sequences[0][1].shape)}")
        self.sequences.append((prompt, tokens, self.reference(prompt, tokens).cpu()))
        self.baseline = None

    @property
    def prompt(self) -> torch.Tensor:
        """The first sequence's prompt: the one the rows are timed on."""
        return self.sequences[0][0]

    def stats(self, decoder: Decoder) -> Stats:
        errors = StepErrors()
        for prompt, tokens, reference in self.sequences:
            teacher_forced(decoder, prompt, tokens,
                           lambda i, logits, r=reference: errors.add(logits.float().cpu(), r[i]))
        return errors.stats()

    def set_baseline(self, eager: Decoder) -> dict:
        self.baseline = self.stats(eager)
        return self.baseline.to_json()

    def judge(self, decoder: Decoder, row: dict, *, informational: bool = False) -> None:
        """Adds `gate` (the verdict) and `failed` to `row`; a row that cannot be gated has failed.
        informational: the verdict only, marked so, and never `failed` (a stock row: where a hoid row fails,
        it shows whether the model it was built from passes on its own)."""
        try:
            if self.baseline is None:
                raise RuntimeError("no eager bfloat16 baseline (the hf-eager row did not run)")
            verdict = judge(self.stats(decoder), self.baseline)
            row["gate"], failed = verdict.to_json(), not verdict.passed
            row["gate"]["sequences"] = len(self.sequences)
        except Exception as e:  # reported as a failed gate, with why
            row["gate"], failed = {"passed": False, "error": f"{type(e).__name__}: {e}"}, True
        if informational:
            row["gate"]["informational"] = True
        else:
            row["failed"] = failed


def gate_prompts(samples: int, shape: Shape, vocab: int, seed: int, device) -> list[torch.Tensor]:
    """The gate's prompts beyond the timed one: enough sequences for `samples` teacher-forced steps, each
    [batch, prompt], drawn on the host from `seed` + 1 (the timed prompt, from `seed`, is what it always was)."""
    sequences = max(1, -(-samples // (shape.batch * shape.new)))
    generator = torch.Generator().manual_seed(seed + 1)
    return [torch.randint(0, vocab, (shape.batch, shape.prompt), generator=generator).to(device)
            for _ in range(sequences - 1)]


def add_sequences(gate: Gate, eager: Decoder, prompts: list[torch.Tensor], shape: Shape) -> None:
    """`prompts` (each [batch, prompt]) added to `gate`, their teacher tokens from one batched generation by the
    eager decoder (whose tokens are the gate's teacher)."""
    if not prompts:
        return
    _, more = measure(eager, torch.cat(prompts), shape.new, warmup=0, ttft_repeats=1)
    for i, other in enumerate(prompts):
        gate.add(other, more[i * shape.batch:(i + 1) * shape.batch])


def _fingerprint(lm) -> float:
    """A number that changes with the weights (random per seed): a gate file is for these weights only."""
    return float(lm.lm_head.weight.float().sum()) + float(lm.model.embed_tokens.weight[:64].float().sum())


def save_gate(path: Path, lm, gate: Gate) -> None:
    """The gate's prompts, teacher tokens and eager baseline (not its references: a float32 forward remakes
    them in seconds, and they are 155 MB a sequence at Qwen3's vocabulary)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"prompts": [p.cpu() for p, _, _ in gate.sequences], "tokens": [t.cpu() for _, t, _ in gate.sequences],
            "baseline": gate.baseline.to_json(), "weights": _fingerprint(lm)}
    replace_atomically(path, lambda tmp: torch.save(data, tmp))


def load_gate(path: Path, lm, prompts: list[torch.Tensor], kind: type[Gate] = Gate) -> Gate | None:
    """The gate (of class `kind`: its references made anew) from a file `save_gate` wrote for these prompts and
    these weights, else None (hf-eager runs)."""
    data = torch.load(path, map_location="cpu")
    saved = data.get("prompts", [])
    same = len(saved) == len(prompts) and all(torch.equal(s, p.cpu()) for s, p in zip(saved, prompts))
    if not same or data["weights"] != _fingerprint(lm):
        progress(f"gate: {path} is for other prompts or other weights: hf-eager runs")
        return None
    device = prompts[0].device
    gate = kind(lm, prompts[0], data["tokens"][0].to(device))
    for other, tokens in zip(prompts[1:], data["tokens"][1:]):
        gate.add(other, tokens.to(device))
    gate.baseline = Stats(**data["baseline"])
    return gate


def add_gate_arguments(ap, *, samples: int, samples_note: str, cache_note: str = "") -> None:
    """The gate's options of a decode benchmark's parser: --gate-cache and --gate-samples (default `samples`,
    its help ending with `samples_note`: why that many)."""
    ap.add_argument("--gate-cache", type=Path, default=None,
                    help="a folder for the gate's teacher tokens and eager baseline per (model, shape, seed): a "
                         "later slice gating hoid rows reads them instead of running hf-eager again (unless "
                         "--rows names it)" + cache_note)
    ap.add_argument("--gate-samples", type=int, default=samples,
                    help="the gate's (step, sequence) samples: ceil(this / (batch x new)) sequences are teacher-"
                         "forced, the first on the timed prompt, the others on prompts drawn from --seed + 1 "
                         + samples_note)


def gate_file(folder: Path | None, model: str, shape: Shape, seed: int, sequences: int) -> Path | None:
    """Where --gate-cache keeps the gate of this model, shape, seed and number of sequences (None: no cache)."""
    if folder is None:
        return None
    return folder / result_name("gate", model, shape.key, f"s{seed}", f"g{sequences}", suffix=".pt")


def reuse_gate(path: Path | None, lm, prompts: list[torch.Tensor], cell: dict, kind: type[Gate] = Gate
               ) -> Gate | None:
    """The gate an earlier slice saved at `path` for these prompts and weights (`load_gate`), recorded in the
    shape's `cell` (its baseline, file and sequences); None where there is none to reuse (hf-eager runs)."""
    if path is None or not path.is_file():
        return None
    gate = load_gate(path, lm, prompts, kind)
    if gate is not None:
        cell["gate_baseline"], cell["gate_from"] = gate.baseline.to_json(), str(path)
        cell["gate_sequences"] = len(prompts)
    return gate
