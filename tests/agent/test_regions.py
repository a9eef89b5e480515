"""hoid.agent.regions.discover: every region counted at each place it matches, and ranked by the time of all
its matches together (Amdahl's law), not by one match's."""

import pytest

from hoid.agent.library_proposer import LibraryProposer
from hoid.agent.loop import resolve_device
from hoid.agent.proposer import Context
from hoid.agent.regions import discover
from hoid.ir import GraphBuilder
from hoid.kernels.registry import library_kernels
from hoid.search.rules import default_rulesets
from hoid.search.space import SearchSpace
from tests.search.graphs import block


@pytest.fixture(scope="module")
def found():
    device = resolve_device("h200")
    space = SearchSpace(block(layers=3), target=device.target())
    space.saturate(default_rulesets())
    return discover(space, list(library_kernels().values()), device, measured=False)


def test_a_region_counts_every_place_it_matches(found):
    by_pattern = {}
    for r in found:
        by_pattern.setdefault(r.pattern, []).append(r)
    # three layers: one RMSNorm and one SiLU gating each, at one signature
    [norm] = by_pattern["rmsnorm"]
    [gating] = by_pattern["silu_mul"]
    assert norm.matches == 3 and gating.matches == 3
    assert all(r.matches >= 1 for r in found)


def test_regions_rank_by_the_time_of_all_their_matches(found):
    totals = [r.total_seconds for r in found]
    assert totals == sorted(totals, reverse=True)
    graph_total = max(r.share and r.total_seconds / r.share for r in found)
    for r in found:
        assert r.total_seconds == pytest.approx(r.seconds * r.matches)
        assert r.share == pytest.approx(min(1.0, r.total_seconds / graph_total))


def test_a_pattern_name_with_two_arities_finds_both():
    """`sdpa` with a mask (the decode attentions, registered first) and without one (`triton.sdpa_wide`): the
    unmasked one-head attention of SDXL's VAE is a region though a masked spec shares its pattern's name."""
    b = GraphBuilder("wide_attention")
    q = b.input("q", (1, 1, 64, 320), "bf16")
    graph = b.build(b.sdpa(q, q, q))
    device = resolve_device("h200")
    space = SearchSpace(graph, target=device.target())
    specs = list(library_kernels().values())
    ids = [s.id for s in specs]
    first_masked = min(i for i, s in enumerate(specs) if s.pattern.name == "sdpa" and len(s.pattern.operands) == 4)
    assert first_masked < ids.index("triton.sdpa_wide"), "the case held here: a masked sdpa spec comes first"
    [region] = [r for r in discover(space, specs, device, measured=False) if r.pattern == "sdpa"]
    assert len(region.types) == 3 and region.types[0].shape == (1, 1, 64, 320)
    proposed = LibraryProposer().propose(Context(graph, [region], device, None))
    assert "triton.sdpa_wide" in {p.kernel.id for p in proposed}
