"""Resume after kill -9: a run SIGKILLed mid-way and resumed keeps every accepted result and repeats no
finished measurement (counted in the journal)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import hoid
from hoid.agent import Journal
from hoid.models.examples import mlp_block

from .helpers import TorchLibrary

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import pytest

import hoid
from hoid.models.examples import mlp_block
from tests.agent.helpers import TorchLibrary
hoid.optimize(mlp_block(), agent=[TorchLibrary()], device="cpu", journal={journal!r}, trials=4)
"""


def test_sigkill_then_resume_loses_nothing_and_repeats_no_measurement(tmp_path, monkeypatch):
    journal, stall = tmp_path / "journal.sqlite", tmp_path / "stalled"
    env = {**os.environ, "HOID_CACHE": str(tmp_path / "measure.sqlite"),
           "HOID_KERNELS": str(tmp_path / "k.sqlite"), "PYTHONPATH": str(ROOT),
           "HOID_TEST_STALL_AFTER": "3", "HOID_TEST_STALL_FILE": str(stall), "TRITON_INTERPRET": "1"}
    child = subprocess.Popen([sys.executable, "-c", SCRIPT.format(journal=str(journal))], env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + 240
        while not stall.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert stall.exists(), "the first run never reached its 4th proposal"
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    with Journal(journal) as j:
        before = j.attempts()
        fresh_before = {m["key"] for m in j.measurements(fresh=True)}
        last_before = max(m["id"] for m in j.measurements())
    checked = [a for a in before if a["verdict"] != "skipped"]  # skips (CuTe without a GPU) are no attempts
    assert len(checked) == 3 and all(a["finished"] for a in before)
    assert fresh_before  # the killed run did measure things

    monkeypatch.setenv("HOID_CACHE", env["HOID_CACHE"])
    monkeypatch.setenv("HOID_KERNELS", env["HOID_KERNELS"])
    opt = hoid.optimize(mlp_block(), agent=[TorchLibrary()], device="cpu", journal=journal, trials=4)
    assert opt.report.resumed
    with Journal(journal) as j:
        after = {a["key"]: a for a in j.attempts(opt.report.run)}
        # a close call timed in turn is timed afresh by design (it guards against drift): no repeat
        fresh_after = [m["key"] for m in j.measurements(fresh=True)
                       if m["id"] > last_before and m["kind"] != "graph in turn"]
    for a in before:  # every decision of the killed run stands, kept ones included
        assert after[a["key"]]["kept"] == a["kept"] and after[a["key"]]["id"] == a["id"]
    kept = {a["kernel"] for a in before if a["kept"]}
    assert kept <= {acc.spec.id for acc in opt.kernels.accepted}
    assert not set(fresh_after) & fresh_before, "a finished measurement was repeated after resuming"
    assert len(after) > len(before)  # and the run went on past where it was killed
    assert opt.report.stop_reason == "every proposer ran dry"


def test_a_journal_the_run_opened_is_whole_in_its_file_once_the_run_returns(tmp_path, monkeypatch):
    """The journal writes ahead (WAL): a file copied while its log still held the run (the H200 runs' archives
    of 12-03 did so) read as empty. A run that opened the journal closes it, which folds the log in."""
    import shutil

    monkeypatch.setenv("HOID_CACHE", str(tmp_path / "measure.sqlite"))
    monkeypatch.setenv("HOID_KERNELS", str(tmp_path / "k.sqlite"))
    journal = tmp_path / "journal.sqlite"
    opt = hoid.optimize(mlp_block(), agent=[TorchLibrary()], device="cpu", journal=journal, trials=4,
                        budget=hoid.Budget(attempts=1))
    copy = tmp_path / "copied" / "journal.sqlite"
    copy.parent.mkdir()
    shutil.copy(journal, copy)  # the file alone, as an archive of the run's folder takes it
    with Journal(copy) as j:
        attempts = j.attempts(opt.report.run)
    assert len([a for a in attempts if a["verdict"] != "skipped"]) == 1


def test_the_measurement_cache_may_be_given_by_path_and_anything_else_is_refused_by_name(tmp_path, monkeypatch):
    from hoid.measure import MeasureCache

    monkeypatch.setenv("HOID_KERNELS", str(tmp_path / "k.sqlite"))
    path = tmp_path / "measure.sqlite"
    hoid.optimize(mlp_block(), agent=[TorchLibrary()], device="cpu", journal=tmp_path / "j.sqlite", trials=4,
                  cache=path, budget=hoid.Budget(attempts=1))
    with MeasureCache(path) as cache:
        assert [e for e in cache.entries() if e.key.device != "NVIDIA H200"]  # measured here, into that file
    with pytest.raises(TypeError, match="MeasureCache or the path"):
        hoid.optimize(mlp_block(), agent=[TorchLibrary()], device="cpu", cache=42)
