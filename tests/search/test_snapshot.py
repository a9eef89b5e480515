"""The snapshot read from egglog's frozen rows is the e-graph egglog's own serializer describes: the same
tensor e-nodes, in the same order, with the same classes and children, and the encoding's bookkeeping
(template relations) is neither an e-node nor counted in the size."""

import json

from hoid.search.library import apply_library
from hoid.search.rules import default_rulesets
from hoid.search.space import SearchSpace

from .graphs import block


def serialized_tensor_nodes(space) -> dict:
    """node id -> (op, class, its Tensor children's classes or None where one is a TensorList), from egglog's
    JSON serialization."""
    data = json.loads(space.engine._egraph.serialize([]).to_json())
    nodes, types = data["nodes"], {c: d["type"] for c, d in data["class_data"].items()}

    def children(raw):
        kids = [nodes[k]["eclass"] for k in raw["children"]]
        if any(types[k] == "TensorList" for k in kids):
            return None
        return tuple(k for k in kids if types[k] == "Tensor")

    return {nid: (raw["op"], raw["eclass"], children(raw)) for nid, raw in nodes.items()
            if types[raw["eclass"]] == "Tensor" and raw["op"] != "N" and not raw["op"].startswith("hoid-")}


def test_snapshot_matches_egglogs_serializer_after_rules_and_kernels():
    space = SearchSpace(block(layers=2, dtype="bf16", hidden=64, inner=192))
    space.saturate(default_rulesets())
    apply_library(space)
    snapshot, serialized = space.snapshot(), serialized_tensor_nodes(space)
    assert list(snapshot.nodes) == list(serialized)
    kinds = {"input", "absent", "out", "kernel"}
    assert any(n.op == "kernel" for n in snapshot.nodes.values())
    compared = 0
    for nid, node in snapshot.nodes.items():
        op, cls, children = serialized[nid]
        assert node.eclass == cls, nid
        assert node.op in kinds or node.op.replace("_", "") == op.lower(), (node.op, op)
        if children is not None:
            assert node.children == children, nid
            compared += 1
    assert compared > len(snapshot.nodes) / 2


def test_template_relations_are_not_e_nodes():
    space = SearchSpace(block(layers=1))
    rows = sum(len(t.outputs) for t in space.engine.tables({"IntVec": "i64", "FloatVec": "f64"}))
    assert space.encoding.templates.rows and rows == space.size()
    assert not any(t.name.startswith("hoid-") for t in space.engine.tables({"IntVec": "i64", "FloatVec": "f64"}))
