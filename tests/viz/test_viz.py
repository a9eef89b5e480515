"""hoid.viz: the picture's nodes are the graph's, its times sum to the profile's, the page is self-contained,
hovering has each node's document line, layers collapse, the DOT/trace/report outputs load."""

import json
import re
import sqlite3

import pytest

from hoid.cli import main
from hoid.ir.text_print import GraphLabels, format_node
from hoid.measure.devices import get_device
from hoid.measure.profile import profile_graph
from hoid.models.examples import mlp_block
from hoid.viz import build_view, profile_trace, render_html, to_dot

H200 = get_device("h200")


def drawn(page: str) -> list[tuple[str, str]]:
    """(classes, data-id) of every node group the page draws."""
    return re.findall(r'<g class="(node [^"]*)" data-id="([^"]*)"', page)


def test_the_page_draws_every_node_of_the_graph_with_its_line_and_times_that_sum():
    graph = mlp_block()
    profile = profile_graph(graph, mode="analytic", device=H200)
    view = build_view(graph, profile)
    page = render_html(view)
    ops = [i for c, i in drawn(page) if c.split()[1] in ("op", "kernel")]
    assert sorted(ops) == sorted(n.name for n in graph.nodes)
    assert sum(n.seconds for n in view.op_nodes) == pytest.approx(profile.total)
    data = json.loads(re.search(r'id="hoid-data">(.*?)</script>', page, re.S).group(1))
    labels = GraphLabels(graph)
    assert all(data["nodes"][n.name]["line"] == format_node(n, labels) for n in graph.nodes)
    assert "modelled" in data["nodes"][graph.nodes[-1].name]["time"]  # analytic times say they are modelled
    assert not re.search(r'(src|href)="(https?:)?//', page) and "@import" not in page  # nothing fetched


def test_kernel_nodes_carry_their_class_source_and_outline_when_drawn_from_a_journal(journal, tmp_path, capsys):
    out = tmp_path / "opt.html"
    assert main(["show", str(journal), "--html", str(out)]) == 0
    page = out.read_text()
    nodes = drawn(page)
    kernels = [i for c, i in nodes if "kernel" in c.split()]
    assert kernels and all("replaced" in c.split() for c, i in nodes if i in kernels)
    data = json.loads(re.search(r'id="hoid-data">(.*?)</script>', page, re.S).group(1))
    source = data["sources"][data["nodes"][kernels[0]]["source"]]
    assert "triton" in source and "def " in source  # the library kernel's module source
    assert "roofline floor" in data["nodes"][kernels[0]]["time"]
    db = sqlite3.connect(journal)
    best = db.execute("select document from graphs order by id desc limit 1").fetchone()[0]
    from hoid import loads

    assert sorted(i for c, i in nodes if c.split()[1] in ("op", "kernel")) == sorted(n.name for n in loads(best).nodes)


def test_repeated_layers_collapse_to_one_with_a_count_and_the_time_kept():
    import torch
    from transformers import AutoModelForCausalLM

    from hoid.models.configs import config
    from hoid.models.llm import decode_step_graph

    cfg = config("qwen3-1.7b-tiny")
    cfg.num_hidden_layers = 5
    if getattr(cfg, "layer_types", None):  # one attention kind per layer
        cfg.layer_types = [cfg.layer_types[0]] * 5
    with torch.device("meta"):
        lm = AutoModelForCausalLM.from_config(cfg).eval()
    graph = decode_step_graph(lm, 16)
    profile = profile_graph(graph, mode="analytic", device=H200)
    full, small = build_view(graph, profile), build_view(graph, profile, collapse=True)
    assert small.collapsed == [(1, 3, 3)]  # layers 1-3 drawn once; 0 and 4 meet the prelude and the tail
    per_layer = len([n for n in full.op_nodes if n.layer == 1])
    assert len(small.op_nodes) == len(full.op_nodes) - 2 * per_layer
    assert {n.count for n in small.op_nodes if n.layer == 1} == {3}
    assert sum(n.seconds for n in small.op_nodes) == pytest.approx(profile.total)
    ids = {n.id for n in small.nodes}
    assert all(a in ids and b in ids for a, b in small.edges)
    page = render_html(small)
    assert len([c for c, _ in drawn(page) if c.split()[1] in ("op", "kernel")]) == len(small.op_nodes)
    assert "x3" in page


def test_show_without_graphviz_says_how_to_install_it_and_writes_the_dot_text(tmp_path, monkeypatch, capsys):
    from hoid import save

    save(mlp_block(), tmp_path / "m.hoid")
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot on it
    assert main(["show", str(tmp_path / "m.hoid"), "--svg", str(tmp_path / "m.svg")]) == 0
    err = capsys.readouterr().err
    assert "Graphviz's dot is not installed" in err and "apt-get install graphviz" in err
    dot = (tmp_path / "m.dot").read_text()
    assert not (tmp_path / "m.svg").exists()
    assert dot.startswith('digraph "mlp_block" {') and dot.rstrip().endswith("}")
    statements = re.findall(r'^  "([^"]+)" \[', dot, re.M)
    assert set(n.name for n in mlp_block().nodes) <= set(statements)
    assert dot == to_dot(build_view(mlp_block()))


def test_the_trace_loads_as_json_with_one_event_per_node_end_to_end(tmp_path):
    from hoid import save

    graph = mlp_block()
    save(graph, tmp_path / "m.hoid")
    assert main(["trace", str(tmp_path / "m.hoid"), "--out", str(tmp_path / "t.json"), "--device", "h200"]) == 0
    trace = json.loads((tmp_path / "t.json").read_text())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [e["args"]["node"] for e in events] == [n.name for n in graph.nodes]
    assert sum(e["dur"] for e in events) == pytest.approx(trace["otherData"]["total_us"])
    assert all(a["ts"] + a["dur"] == pytest.approx(b["ts"]) for a, b in zip(events, events[1:]))
    assert profile_trace(graph, profile_graph(graph, mode="analytic", device=H200))["otherData"]["mode"] == "analytic"


def test_the_report_page_has_its_plots_and_every_attempt_with_its_reason(journal, tmp_path):
    out = tmp_path / "r.md"
    assert main(["report", str(journal), "--out", str(out)]) == 0
    page = out.with_suffix(".html").read_text()
    assert page.count('src="data:image/png;base64,') == 3  # best over attempts, regions, roofline
    assert "modelled" in page and "speedup" not in page.split("<h2>")[0].replace("not a speedup", "")
    db = sqlite3.connect(journal)
    whys = [w for (w,) in db.execute("select why from attempts")]
    assert page.count("<tr class=") == len(whys) and all(w.split(" (")[0] in page for w in whys)
    regions = json.loads(re.search(r'id="hoid-regions">(.*?)</script>', page, re.S).group(1))
    assert regions and all(r["after_s"] < r["before_s"] for r in regions)
