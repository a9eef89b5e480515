"""How the kernel tests check hoid's own kernels (the library's, the generated ones) with hoid.verify.

Two timing runs, not hoid.verify's default 30: the timing runs catch a candidate that turns wrong once a
benchmark loop has called it (a cheater's trick: tests/verify/test_cheaters.py checks that defence at the
default). The kernels tested here are hoid's own stateless source, and under Triton's interpreter, where
every launch costs, the 30 calls were two thirds of a check's launches (a looped rmsnorm: 30 of 44
launches, 23 s of its 35 s). Two keep the path run: calls in a row on one set of buffers, then re-checks."""

TIMING_RUNS = 2
