"""hoid's pages in a real headless Chromium: they load without script errors and fetch nothing, every node is
drawn, kernel nodes look like kernels, hovering shows the node's line, the zoom buttons zoom, the report's
plots decode and its regions parse. Skips (saying what to install) without Chromium, chromedriver and selenium.

HOID_SCREENSHOTS=docs/images also writes the screenshots the guide shows (docs/see-it.md) there."""

import json
import os
import shutil
from pathlib import Path

import pytest

from hoid.cli import main
from hoid.ir.text_print import GraphLabels, format_node
from hoid.measure.devices import get_device
from hoid.measure.profile import profile_graph
from hoid.viz import build_view, render_html
from hoid.viz.html import KERNEL_STROKE, share_colour

pytestmark = pytest.mark.browser

H200 = get_device("h200")
DRAWN_OPS = "g.node.op, g.node.kernel"


def rgb(hex_colour: str) -> str:
    """'#1f4fd1' as getComputedStyle writes it: 'rgb(31, 79, 209)'."""
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def qwen3_decode(layers: int | None = None):
    """Qwen3-1.7B's decode step (real widths, meta weights), cut to `layers` decoder layers if given."""
    from hoid.models import build_model, config, decode_step_graph

    if layers is None:
        return decode_step_graph(build_model("qwen3-1.7b", device="meta"), 512)
    import torch
    from transformers import AutoModelForCausalLM

    cfg = config("qwen3-1.7b")
    cfg.num_hidden_layers = layers
    if getattr(cfg, "layer_types", None):
        cfg.layer_types = cfg.layer_types[:layers]
    with torch.device("meta"):
        lm = AutoModelForCausalLM.from_config(cfg).eval()
    return decode_step_graph(lm, 512)


def assert_not_blank(png: Path) -> None:
    """A screenshot with a drawing in it: many colours, and a good part of it not the background's."""
    import numpy as np
    from matplotlib.image import imread

    pixels = (imread(png)[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    colours, counts = np.unique(pixels, axis=0, return_counts=True)
    assert len(colours) > 50, f"{png}: {len(colours)} colours"
    assert 1 - counts.max() / counts.sum() > 0.05, f"{png}: almost all one colour"


def keep(png: Path, name: str) -> None:
    if os.environ.get("HOID_SCREENSHOTS"):
        shutil.copy(png, Path(os.environ["HOID_SCREENSHOTS"]) / name)


def open_page(browser, path) -> None:
    errors = browser.open(path)
    assert errors == [], errors
    assert browser.fetched() == []  # self-contained: nothing loaded beyond the file


def test_the_harness_sees_script_errors_broken_images_and_fetches(browser, tmp_path):
    """What the other tests assert absent, the harness does see when it is there."""
    page = tmp_path / "broken.html"
    page.write_text('<!doctype html><img id="i" src="data:image/png;base64,AAAA"><img src="missing.png">'
                    "<script>console.error('logged'); notAFunction();</script>")
    errors = browser.open(page)
    assert any("logged" in e for e in errors) and any("notAFunction" in e for e in errors)
    assert browser.js("return document.getElementById('i').naturalWidth") == 0
    assert any(name.endswith("missing.png") for name in browser.fetched())


@pytest.mark.slow
def test_a_two_layer_qwen3_decode_step_draws_every_node_and_hovering_shows_its_line(browser, tmp_path):
    graph = qwen3_decode(2)
    profile = profile_graph(graph, mode="analytic", device=H200)
    view = build_view(graph, profile)
    path = tmp_path / "qwen3_2.html"
    path.write_text(render_html(view, "Qwen3-1.7B decode step, 2 layers"))
    open_page(browser, path)
    ids = browser.js(f"return [...document.querySelectorAll('{DRAWN_OPS}')].map(g => g.dataset.id)")
    assert sorted(ids) == sorted(n.name for n in graph.nodes)
    sizes = browser.js("return [...document.querySelectorAll('g.node')].map(g => g.getBoundingClientRect())"
                       ".map(r => r.width * r.height)")
    assert len(sizes) == len(view.nodes) and min(sizes) > 0  # drawn, not just present
    hottest = max(view.op_nodes, key=lambda n: n.share)
    fill = browser.js(f"return getComputedStyle(document.querySelector('g.node[data-id=\"{hottest.id}\"] "
                      "rect.box')).fill")
    assert fill == rgb(share_colour(hottest.share, hottest.share))  # the hottest node is the reddest
    labels, by_name = GraphLabels(graph), {n.name: n for n in graph.nodes}
    for node in (graph.nodes[0], by_name[hottest.id], graph.nodes[-1]):
        browser.hover(f'g.node[data-id="{node.name}"]')
        tip = browser.js("const t = document.getElementById('tip'); "
                         "return [getComputedStyle(t).display, t.querySelector('pre.line').textContent]")
        assert tip == ["block", format_node(node, labels)]
    browser.js("window.scrollTo(document.body.scrollWidth, document.body.scrollHeight)")
    assert browser.js("return [window.scrollX > 0, window.scrollY > 0]") == [True, True]
    header = browser.js("return document.querySelector('header').getBoundingClientRect().toJSON()")
    assert header["left"] == 0 and header["top"] == 0  # the title and zoom buttons stay in view
    browser.click("button[data-zoom='fit']")  # and still work from there
    assert browser.js("return +document.querySelector('svg').getAttribute('width')") == pytest.approx(
        browser.js("return window.innerWidth"), rel=1e-3)
    browser.hover(f'g.node[data-id="{hottest.id}"]')
    shot = browser.screenshot(tmp_path / "qwen3_2.png")
    assert_not_blank(shot)
    keep(shot, "browser_qwen3_decode_2_layers.png")
    assert browser.errors() == []


def test_an_optimized_model_draws_its_kernels_as_kernels_with_their_source_on_hover(browser, journal, tmp_path):
    path = tmp_path / "opt.html"
    assert main(["show", str(journal), "--html", str(path)]) == 0
    open_page(browser, path)
    from hoid.viz.cli import _from_journal

    graph, replaced, _ = _from_journal(journal, None)
    assert browser.js(f"return document.querySelectorAll('{DRAWN_OPS}').length") == len(graph.nodes)
    kernels = browser.js("return [...document.querySelectorAll('g.node.kernel')].map(g => g.dataset.id)")
    assert kernels and set(kernels) == replaced
    style = ("const s = getComputedStyle(document.querySelector(arguments[0])); "
             "return [s.stroke, s.strokeWidth, s.strokeDasharray]")
    op = next(n.name for n in graph.nodes if n.op != "kernel")
    assert browser.js(style, f'g.node[data-id="{kernels[0]}"] rect.box')[:2] == [rgb(KERNEL_STROKE), "3px"]
    assert browser.js(style, f'g.node[data-id="{op}"] rect.box')[:2] != [rgb(KERNEL_STROKE), "3px"]
    assert browser.js(style, f'g.node[data-id="{kernels[0]}"] rect.replaced')[2] == "6px, 3px"  # the outline
    browser.hover(f'g.node[data-id="{kernels[0]}"]')
    text = browser.js("return document.getElementById('tip').innerText")
    node = next(n for n in graph.nodes if n.name == kernels[0])
    assert format_node(node, GraphLabels(graph)) in text
    assert "kernel source:" in text and "roofline floor" in text
    shown = browser.js("return document.querySelector('#tip pre.src').textContent")
    data = browser.js("return JSON.parse(document.getElementById('hoid-data').textContent)")
    assert shown == data["sources"][data["nodes"][kernels[0]]["source"]] and "triton" in shown and "def " in shown
    shot = browser.screenshot(tmp_path / "opt.png")
    assert_not_blank(shot)
    keep(shot, "browser_mlp_block_optimized.png")
    browser.hover("header b")  # the pointer leaves the node: the tip goes
    assert browser.js("return getComputedStyle(document.getElementById('tip')).display") == "none"


def test_the_zoom_buttons_and_keys_resize_the_drawing(browser, journal, tmp_path):
    path = tmp_path / "opt.html"
    assert main(["show", str(journal), "--html", str(path)]) == 0
    open_page(browser, path)
    width = lambda: browser.js("return document.querySelector('svg').getBoundingClientRect().width")  # noqa: E731
    w0 = width()
    browser.click("button[data-zoom='1.25']")
    assert width() == pytest.approx(w0 * 1.25, rel=1e-3)
    browser.click("button[data-zoom='0.8']")
    assert width() == pytest.approx(w0, rel=1e-3)  # the minus button divides by 1.25
    browser.click("button[data-zoom='fit']")
    assert width() == pytest.approx(browser.js("return window.innerWidth"), rel=1e-3)
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(browser.driver).send_keys("+").perform()
    assert width() == pytest.approx(browser.js("return window.innerWidth") * 1.25, rel=1e-3)
    assert browser.errors() == []


def test_the_report_page_shows_its_plots_and_its_regions_parse_in_the_browser(browser, journal, tmp_path):
    out = tmp_path / "r.md"
    assert main(["report", str(journal), "--out", str(out)]) == 0
    page = out.with_suffix(".html")
    open_page(browser, page)
    images = browser.js("return [...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight])")
    assert len(images) == 3 and all(done and w > 100 and h > 100 for done, w, h in images)
    regions = browser.js("return JSON.parse(document.getElementById('hoid-regions').textContent)")
    text = page.read_text()
    blob = text[text.index('id="hoid-regions">') + len('id="hoid-regions">'):text.rindex("</script>")]
    assert regions and regions == json.loads(blob)  # the browser reads what hoid wrote
    assert all(r["after_s"] < r["before_s"] for r in regions)
    rows = browser.js("return [...document.querySelectorAll('tr[class]')].map(r => r.className)")
    assert rows and set(rows) <= {"kept", "discarded", "rejected", "skipped"} and "kept" in rows
    shot = browser.screenshot(tmp_path / "report.png")
    assert_not_blank(shot)


@pytest.mark.slow
def test_the_28_layer_decode_step_page_is_under_5_mb_and_every_node_is_drawn(browser, tmp_path):
    """Its draw time is a target of benchmarks/viz_page.py (timed there, not here)."""
    graph = qwen3_decode()
    profile = profile_graph(graph, mode="analytic", device=H200)
    for collapse in (False, True):
        view = build_view(graph, profile, collapse=collapse)
        path = tmp_path / f"qwen3_28_{collapse}.html"
        path.write_text(render_html(view, "Qwen3-1.7B decode step"))
        assert path.stat().st_size < 5e6
        open_page(browser, path)
        count = browser.js(f"return document.querySelectorAll('{DRAWN_OPS}').length")
        assert count == (len(view.op_nodes) if collapse else len(graph.nodes))
        if collapse:
            assert count < len(graph.nodes) / 5 and view.collapsed == [(1, 26, 26)]
            standin = max((n for n in view.op_nodes if n.count == 26), key=lambda n: n.share)
            browser.hover(f'g.node[data-id="{standin.id}"]')
            assert "summed over 26 layers" in browser.js("return document.getElementById('tip').innerText")
            shot = browser.screenshot(tmp_path / "collapsed.png")
            assert_not_blank(shot)
            keep(shot, "browser_qwen3_decode_28_collapsed.png")
