"""The one decode loop every row of `benchmarks/decode.py` is timed and gated with.

A row is a `Decoder`: `prefill(ids [B, P], position) -> token [B, 1]` fills the cache from slot 0 and
returns the first new token; `step(token [B, 1], position) -> token [B, 1]` runs one decode step at
`position` (an i64[1] tensor the loop fills in place, so a CUDA graph sees one address). A decoder that
can be gated also gives logits: `prefill_logits` / `step_logits` -> [B, V] (the last position's).

`measure` runs a warm-up generation (compiles, CUDA-graph captures), then times the prefill (time to
first token, the median of a few) and a greedy decode of the remaining new tokens, each token fed back
as the next input. `teacher_forced` feeds given tokens instead and hands each step's logits to a
callback (the correctness gate). `run_row` wraps a row's build and measurement in `record_row`, the one row
wrapper of every benchmark (decode and forward workloads alike): peak memory, a `Skip` (a row this device
cannot run, with the reason), or an error, recorded instead of raised.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import statistics
import sys
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

if not torch.cuda.is_available():
    # every benchmark's CPU smoke run plans for the H200 where asked (Triton kernels in the plan), and runs them
    # under Triton's interpreter: it must be chosen before triton is first imported (a plain
    # `workload_whisper.py --tiny --device cpu` raised TritonDeviceError in its decode row, 12-05)
    os.environ.setdefault("TRITON_INTERPRET", "1")

_BEGAN = time.perf_counter()


def elapsed() -> float:
    """Seconds since the run began (this module's import)."""
    return time.perf_counter() - _BEGAN


def progress(text: str) -> None:
    """One line on stdout, flushed, stamped with `elapsed()`: a GPU call cut off by its time limit still
    shows in its log which phase the time went to."""
    print(f"[{elapsed():7.1f} s] {text}", flush=True)


# A phase that runs past this many seconds has every thread's Python stack written to stderr (and again each
# time as long again): Whisper's exported encoder stalled in its first compiled calls twice on the H100 (12-06),
# each time after the compile-reduce-overhead row, and the call's limit cut the run with no word of where.
# The watch is a Python thread that reads the stacks under the GIL: faulthandler's watchdog reads them without
# it, and crashed the SDXL UNet's run (a segmentation fault at its first dump, mid-Inductor, 12-06 session 19).
STALL_S = float(os.environ.get("HOID_BENCH_STALL_S", "150"))
_open_phases: list[tuple[str, threading.Event]] = []


@contextmanager
def phase(what: str):
    """`progress` lines at the start and the end of `what`, the end with its seconds; past `STALL_S`, the
    stacks (`_stall_watch`), so that a stall names its place in the log."""
    progress(f"{what} ...")
    begin = time.perf_counter()
    ok = False
    if _open_phases:  # one watch at a time: the innermost phase's
        _open_phases[-1][1].set()
    _open_phases.append((what, _watch(what)))
    try:
        yield
        ok = True
    finally:
        _open_phases.pop()[1].set()
        if _open_phases:  # the phase around this one is watched again, from now
            outer = _open_phases[-1][0]
            _open_phases[-1] = (outer, _watch(outer))
        progress(f"{what}: {time.perf_counter() - begin:.1f} s" + ("" if ok else " (raised)"))


def _watch(what: str) -> threading.Event:
    """Start watching `what`; setting the returned event ends the watch."""
    done = threading.Event()
    threading.Thread(target=_stall_watch, args=(what, done), name=f"stall watch: {what}", daemon=True).start()
    return done


def _stall_watch(what: str, done: threading.Event) -> None:
    """Every `STALL_S` until `done`: each other thread's stack to stderr (most recent call first, as a
    traceback reads), or to the process's own where a caller replaced stderr; a diagnosis, not a check."""
    began = time.perf_counter()
    while not done.wait(STALL_S):
        lines = [f"stall watch: {what!r} still running after {time.perf_counter() - began:.1f} s; every thread's "
                 "stack, most recent call first:"]
        names = {t.ident: t.name for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            if ident == threading.get_ident():
                continue
            lines.append(f"Thread {names.get(ident, ident)!r} (most recent call first):")
            lines.extend(line.rstrip("\n") for line in reversed(traceback.format_stack(frame)))
        text = "\n".join(lines) + "\n"
        for stream in (sys.stderr, sys.__stderr__):
            try:
                stream.write(text)
                stream.flush()
                break
            except (AttributeError, OSError, ValueError):
                continue


class OptimizeLog:
    """`hoid.optimize`'s `progress` callable for a benchmark's log: each event one stamped line (`progress`),
    except the regions a proposer skips (codegen refuses hundreds of fusions on a full model, 221 on
    Qwen3-1.7B's step, each journaled with why): those are counted per proposer and `summary()` prints the
    counts. A GPU call cut off mid-optimize still shows in its log what the budget went to."""

    def __init__(self, name: str):
        self.name = name
        self.skipped: dict[str, int] = {}

    def __call__(self, event: dict) -> None:
        if event.get("kind") == "region skipped":
            proposer = event.get("proposer", "?")
            self.skipped[proposer] = self.skipped.get(proposer, 0) + 1
            return
        fields = ", ".join(f"{k}={v}" for k, v in event.items() if k != "kind" and len(str(v)) < 160)
        progress(f"optimize {self.name}: {event.get('kind')}: {fields}")

    def summary(self, report=None) -> None:
        """The skipped counts, and what the run's end left untried (`report.unreached`)."""
        for proposer, count in sorted(self.skipped.items()):
            progress(f"optimize {self.name}: {count} regions skipped by {proposer} (each with why in the run's "
                     "journal)")
        for line in getattr(report, "unreached", ()):
            progress(f"optimize {self.name}: not reached: {line}")


def budget_arg(text: str) -> str:
    """argparse's `type` for every benchmark's --optimize-budget: the text as given, refused at once where
    `hoid.Budget.parse` refuses it: found at the hoid row, after the stock rows, a run had spent five minutes
    for nothing (an SDXL UNet run asked for "5m30s", 12-06)."""
    from hoid.agent.budget import Budget

    try:
        Budget.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def result_name(*parts: str, suffix: str = ".json") -> str:
    """A results file name: `parts` joined by '-', in the characters a GPU call brings back ([A-Za-z0-9._-]:
    the device refused a '+'), anything else made '_'."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", "-".join(parts)) + suffix


def save_json(path, data) -> None:
    """`data` as JSON at `path`, written through a temporary file renamed over it (`replace_atomically`): a
    run killed mid-write keeps the file it had."""
    from hoid.ir.io import replace_atomically

    text = json.dumps(data, indent=1, default=str) + "\n"
    replace_atomically(path, lambda tmp: tmp.write_text(text))


@dataclass(frozen=True)
class Shape:
    """One benchmark cell: `prompt` tokens, then `new` tokens generated, `batch` sequences; the cache holds
    prompt + new slots."""

    prompt: int
    new: int
    batch: int

    @property
    def cache_len(self) -> int:
        return self.prompt + self.new

    @property
    def key(self) -> str:
        return f"p{self.prompt}-n{self.new}-b{self.batch}"


class Skip(Exception):  # noqa: N818  (a row this device cannot run: not an error)
    """Raised by a row's builder when the device cannot run it; the message says why."""


@dataclass
class Decoder:
    prefill: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    step: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    prefill_logits: Callable | None = None
    step_logits: Callable | None = None
    info: dict = field(default_factory=dict)  # what the row reports beyond the loop's figures
    describe: Callable[[], dict] | None = None  # more of that, known only once it ran (captured, profile)
    close: Callable[[], None] | None = None  # frees what the row holds beyond the decoder (temp dirs...)


def open_device(name: str | None) -> tuple[torch.device, str]:
    """The benchmark's device (`--device`; default the GPU when there is one) and its name for the report;
    exits naming the fix when CUDA is asked for and absent."""
    import platform

    device = torch.device(name or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA GPU here (use --device cpu --tiny for the smoke run)")
    return device, torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({platform.machine()})"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _positions(device):
    return torch.zeros((1,), dtype=torch.long, device=device), torch.zeros((1,), dtype=torch.long, device=device)


def measure(decoder: Decoder, prompt: torch.Tensor, new_tokens: int, *, warmup: int = 8,
            ttft_repeats: int = 11) -> tuple[dict, torch.Tensor]:
    """(figures, generated tokens i64[B, new_tokens]) of a greedy decode of `new_tokens` after `prompt`.

    The time to first token is the median of `ttft_repeats` prefills: with 3, Qwen3-4B's hoid row read 4.22 and
    4.58 ms in two sessions over the same prefill graph (3.93 and 3.98 ms of kernels, 2026-12-04), enough to
    flip its comparison with stock (4.56); a prefill costs milliseconds, so 11 are cheap."""
    device = prompt.device
    batch, length = prompt.shape
    generated = torch.zeros((new_tokens, batch, 1), dtype=torch.long, device=device)  # [i] is contiguous
    zero, pos = _positions(device)
    begin = time.perf_counter()
    generated[0].copy_(decoder.prefill(prompt, zero))
    for i in range(1, min(warmup, new_tokens - 1) + 1):
        pos.fill_(length + i - 1)
        generated[i].copy_(decoder.step(generated[i - 1], pos))
    sync(device)
    warmup_s = time.perf_counter() - begin
    ttft = []
    for _ in range(ttft_repeats):  # a prefill rewrites slots 0..P-1: repeating it leaves the same cache
        sync(device)
        begin = time.perf_counter()
        first = decoder.prefill(prompt, zero)
        sync(device)
        ttft.append(time.perf_counter() - begin)
    generated[0].copy_(first)
    sync(device)
    begin = time.perf_counter()
    for i in range(1, new_tokens):
        pos.fill_(length + i - 1)
        generated[i].copy_(decoder.step(generated[i - 1], pos))
    sync(device)
    seconds = time.perf_counter() - begin
    steps = new_tokens - 1
    figures = {"tokens_per_s": batch * steps / seconds, "steps_per_s": steps / seconds,
               "ttft_s": statistics.median(ttft), "decode_s": seconds, "warmup_s": warmup_s}
    return figures, generated.squeeze(-1).T.contiguous()


def tokens_per_second(step: Callable, steps: int, *, warmup: int = 8, batch: int = 1,
                      device: str | torch.device = "cuda") -> float:
    """Greedy decode of `steps` timed tokens through `step(token [B, 1], position) -> token` alone: a
    one-token prompt whose "prefill" is the step at position 0 (a graph benchmarked without its prefill)."""
    prompt = torch.zeros((batch, 1), dtype=torch.long, device=device)
    figures, _ = measure(Decoder(prefill=step, step=step), prompt, steps + 1, warmup=warmup, ttft_repeats=1)
    return figures["tokens_per_s"]


def teacher_forced(decoder: Decoder, prompt: torch.Tensor, tokens: torch.Tensor,
                   on_step: Callable[[int, torch.Tensor], None]) -> None:
    """Feed `tokens` i64[B, N] (the first N new tokens) after `prompt`; `on_step(i, logits [B, V])` gets the
    logits predicting new token i: i = 0 from the prefill, then one per decode step."""
    if decoder.prefill_logits is None or decoder.step_logits is None:
        raise ValueError("this decoder gives no logits: it cannot be gated")
    device = prompt.device
    length = prompt.shape[1]
    zero, pos = _positions(device)
    on_step(0, decoder.prefill_logits(prompt, zero))
    for i in range(1, tokens.shape[1]):
        pos.fill_(length + i - 1)
        on_step(i, decoder.step_logits(tokens[:, i - 1:i].contiguous(), pos))


def last_logits(logits: torch.Tensor) -> torch.Tensor:
    """[B, T, V] -> [B, V] at the last position."""
    return logits[:, -1]


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """[B, T, V] -> the next token [B, 1] (argmax at the last position)."""
    return logits[:, -1:].argmax(dim=-1)


def logits_and_token(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, T, V] -> (the last position's logits [B, V], the greedy token [B, 1]): what a compiled step
    returns so that the gate reads the logits of the very program that is timed."""
    return last_logits(logits), greedy(logits)


def paired(prefill: Callable, step: Callable, **kw) -> Decoder:
    """A Decoder over a prefill and a step that each return (logits [B, V], token [B, 1])."""
    return Decoder(prefill=lambda ids, pos: prefill(ids, pos)[1], step=lambda tok, pos: step(tok, pos)[1],
                   prefill_logits=lambda ids, pos: prefill(ids, pos)[0],
                   step_logits=lambda tok, pos: step(tok, pos)[0], **kw)


def release(device: torch.device) -> None:
    """Free what the last row left: dynamo's caches (compiled graphs hold weights), Python garbage, the
    allocator's cached blocks, so the next row's peak memory is its own. On the CPU no peak is measured and
    a collection costs 0.23 s (the tests' tiny runs: 30 of them were 7 s of a 47 s decode smoke): not there."""
    torch._dynamo.reset()
    if device.type == "cuda":
        gc.collect()
        torch.cuda.empty_cache()


def allocated(device: torch.device) -> int | None:
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else None


def record_row(key: str, name: str, group: str, device: torch.device, work: Callable[[dict, list], None]) -> dict:
    """The one wrapper of a benchmark row, decode or forward: frees what the last row left, resets the peak
    memory, runs `work(row, closers)` (it fills `row`, and appends to `closers` what must run when the row
    ends, whether it raised or not), and records a `Skip` as skipped with its reason and any other exception
    as an error (printed), so one broken row does not cost a whole GPU run. `row["status"]` is "ok" unless
    `work` set it or raised."""
    row = {"key": key, "name": name, "group": group}
    closers: list[Callable[[], None]] = []
    began = time.perf_counter()
    try:
        release(device)
        row["start_bytes"] = allocated(device)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        work(row, closers)
        row.setdefault("status", "ok")
    except Skip as e:
        row.update(status="skipped", reason=str(e))
    except Exception as e:  # recorded, printed, and the run goes on to the next row
        traceback.print_exc()
        row.update(status="error", reason=f"{type(e).__name__}: {e}")
    finally:
        for close in closers:
            close()
        closers.clear()
        release(device)
        row["row_s"] = time.perf_counter() - began  # the row's whole wall time: what a GPU slice costs
    return row


def peak_bytes(device: torch.device) -> int | None:
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None


def built(row: dict, device: torch.device) -> None:
    """A row's build is done: its peak so far is `build_peak_bytes` (an optimize's finalists, Inductor's
    autotuning), and the peak starts again from what the built row holds, so that `peak_bytes` is what running
    it needs. BGE-M3's hoid row reported 33.4 GiB (H100, 12-05), the 4-minute optimize's, for a step that
    holds ~1.5 GiB as the stock rows do."""
    row["build_peak_bytes"] = peak_bytes(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def run_row(key: str, name: str, group: str, build: Callable[[], Decoder], prompt: torch.Tensor, new_tokens: int,
            *, warmup: int = 8, after: Callable[[Decoder, dict, torch.Tensor], None] | None = None) -> dict:
    """One decode row (`record_row`): build the decoder, measure it, then `after(decoder, row, tokens)` (the
    gate) while it is alive."""

    def work(row: dict, closers: list) -> None:
        begin = time.perf_counter()
        with phase(f"{key}: build"):
            decoder = build()
        if decoder.close is not None:
            closers.append(decoder.close)
        row["build_s"] = time.perf_counter() - begin
        built(row, prompt.device)
        with phase(f"{key}: measure (the warm-up compiles and captures)"):
            figures, tokens = measure(decoder, prompt, new_tokens, warmup=warmup)
        progress(f"{key}: warm-up {figures['warmup_s']:.1f} s, decode {figures['decode_s']:.1f} s")
        row.update(figures)
        row["peak_bytes"] = peak_bytes(prompt.device)
        row.update(decoder.info)
        if decoder.describe is not None:
            with phase(f"{key}: describe (hoid's profile)"):
                row.update(decoder.describe())
        row["status"] = "ok"
        if after is not None:
            with phase(f"{key}: gate"):
                after(decoder, row, tokens)

    return record_row(key, name, group, prompt.device, work)
