"""What a kernel's PTX says about its correctness, beyond what a numerical check can see.

Read from the PTX text (what `triton.compile` or a launch built), in program text order, which is how Triton
lays out the patterns read here. Used by the library's build tests (every library and example kernel is held
at zero) and by `hoid.verify` on a GPU, where an untrusted kernel's builds are read after it has run.
"""

from __future__ import annotations

import re

_WRITE = re.compile(r"^(?:@!?%p\d+\s+)?(?:(?:st|red|atom)\.global\b|cp\.async\.bulk\S*\.global\.shared)")
_RELEASE = re.compile(r"^(?:@!?%p\d+\s+)?(?:red|atom)\.global\S*\.(?:release|acq_rel)\b")
_CTA_BARRIER = re.compile(r"^(?:@!?%p\d+\s+)?(?:bar|barrier)\.sync\b")
_POLL = re.compile(r"^(?:@!?%p\d+\s+)?atom\.global\S*\.acquire\b")  # reads a flag: nothing to publish


def unsynced_releases(ptx: str) -> int:
    """The release atomics of `ptx` that a global write precedes with no CTA barrier between them.

    A Triton atomic on a scalar (a split-K ticket: "my partials are in, am I the last?") is one thread's
    instruction; its release orders that thread's own earlier writes, not the other warps' (the PTX memory
    model: release is cumulative over what the releasing thread has observed, and a warp that has not reached
    its stores yet has shown it nothing). So the last program to arrive could read a partial another warp of an
    earlier program had not written: stale values from the previous launch, the more likely the longer that
    warp lags. A `bar.sync` (`tl.debug_barrier()`) before the ticket makes every thread's writes precede it, as
    CUTLASS's semaphores do (`__syncthreads()`, then thread 0's `red.release.gpu`). Read in program text
    order, which is how Triton lays out such a ticket after its stores; 0 for a correct kernel."""
    count, wrote = 0, False
    for line in ptx.splitlines():
        line = line.strip()
        if _CTA_BARRIER.match(line):
            wrote = False
        elif _RELEASE.match(line):  # (its own write is the releasing thread's: no later release needs it synced)
            count += wrote
        elif _WRITE.match(line) and not _POLL.match(line):
            wrote = True
    return count


def global_writes(ptx: str) -> int:
    """The global stores and atomics in `ptx` (a PDL build's text ahead of its wait must have none)."""
    return sum(1 for line in ptx.splitlines() if _WRITE.match(line.strip()))
