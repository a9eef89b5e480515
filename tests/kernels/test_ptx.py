"""The PTX readings of `hoid.kernels.ptx`, on PTX lines as Triton writes them."""

from hoid.kernels.ptx import unsynced_releases


def test_the_release_reader_follows_barriers_and_writes_in_program_order():
    store, ticket, bar = "@%p2 st.global.b32 [ %rd1 + 0 ], { %r1 };", \
        "@%p1 atom.global.gpu.acq_rel.add.u32 %r5, [ %rd3 + 0 ], %r6;", "bar.sync \t0;"
    relaxed = "@%p1 atom.global.gpu.relaxed.add.f32 %r7, [ %rd4 + 0 ], %r8;"
    assert unsynced_releases("\n".join([store, ticket])) == 1
    assert unsynced_releases("\n".join([store, bar, ticket])) == 0
    assert unsynced_releases("\n".join([relaxed, ticket])) == 1  # relaxed atomics are writes to publish too
    assert unsynced_releases("\n".join([ticket, bar, store])) == 0  # a write after the ticket is not its concern
    assert unsynced_releases("\n".join([store, bar, ticket, ticket])) == 0  # the ticket's own write: one thread's
    poll = "@%p3 atom.global.gpu.acquire.add.u32 %r9, [ %rd5 + 0 ], 0;"
    assert unsynced_releases("\n".join([poll, ticket])) == 0  # a barrier's poll reads a flag: nothing to publish
