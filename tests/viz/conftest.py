"""Fixtures of the picture tests: one optimize run's journal to draw, and one headless Chromium."""

import pytest

from hoid.cli import main


@pytest.fixture(scope="module")
def journal(tmp_path_factory):
    """One optimize run of the example (its first attempt kernelizes gate/up + SiLU): a journal to draw."""
    where = tmp_path_factory.mktemp("run")
    mp = pytest.MonkeyPatch()
    mp.setenv("HOID_CACHE", str(where / "c.sqlite"))
    mp.setenv("HOID_KERNELS", str(where / "k.sqlite"))
    assert main(["optimize", "example:mlp_block", "--budget", "1 attempts", "--device", "h200",
                 "--journal", str(where / "j.sqlite")]) == 0
    yield where / "j.sqlite"
    mp.undo()


@pytest.fixture(scope="session")
def browser():
    """A headless Chromium for the session; skips, saying what to install, where there is none."""
    from hoid.viz.browser import Browser, BrowserMissing, find_browser

    try:
        find_browser()
    except BrowserMissing as e:
        pytest.skip(str(e))
    b = Browser()
    yield b
    b.close()
