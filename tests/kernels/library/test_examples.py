"""Every library kernel's own examples satisfy its constraints. `check_kernel` draws them and stops at one that
does not: the decode router drew k = 40 of 40 experts, past the 32 its selection holds, at one seed of twenty
on the H100 (12-07), and its check raised instead of giving a verdict. Drawing is cheap: nothing runs."""

import random

import pytest

from hoid.kernels import all_kernels

WITH_EXAMPLES = sorted(k.id for k in all_kernels().values() if k.examples is not None)


@pytest.mark.parametrize("kernel_id", WITH_EXAMPLES)
def test_its_own_examples_satisfy_its_constraints(kernel_id):
    spec, rng = all_kernels()[kernel_id], random.Random(0)
    for _ in range(300):
        types, attrs = spec.examples(rng)
        unmet = spec.rejects(types, attrs)
        assert unmet is None, f"{kernel_id}: its example {[str(t) for t in types]} {attrs} breaks: {unmet}"
