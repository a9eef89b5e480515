"""The measurement cache: keys, reload, concurrent writers (processes), merge, efficiency, choices."""

import multiprocessing
import sqlite3
import time

import pytest

from hoid.ir import TensorType
from hoid.measure.cache import MeasureCache, MeasureKey, default_cache_path
from hoid.measure.timing import Timing

TYPES = [TensorType((4, 64), "bf16"), TensorType((64,), "bf16")]


def key(kernel="torch.rmsnorm", params=None, device="NVIDIA H200", version="abc123", attrs=None):
    attrs = attrs if attrs is not None else {"eps": 1e-6}
    return MeasureKey.of(device, kernel, version, params or {}, TYPES, attrs)


def test_put_get_and_reload_from_disk(tmp_path):
    path = tmp_path / "m.sqlite"
    with MeasureCache(path) as cache:
        cache.put(key(), Timing((1e-6, 2e-6, 3e-6), "cuda-graph"), floor=1e-6)
    with MeasureCache(path) as cache:
        entry = cache.get(key())
        assert entry.median == 2e-6 and entry.runs == 3 and entry.method == "cuda-graph"
        assert entry.efficiency == pytest.approx(0.5)
        assert cache.get(key(params={"BLOCK": 64})) is None


def test_key_is_canonical_and_distinguishes_every_part():
    assert key(params={"a": 1, "b": 2}) == key(params={"b": 2, "a": 1})
    variants = {key(), key(device="cpu"), key(kernel="triton.rmsnorm"), key(version="def"),
                key(params={"BLOCK": 64}), key(attrs={"eps": 1e-5})}
    assert len(variants) == 6
    assert key().types == "bf16[4,64];bf16[64]"


def test_default_path_follows_HOID_CACHE(monkeypatch, tmp_path):
    monkeypatch.setenv("HOID_CACHE", str(tmp_path / "x.sqlite"))
    assert default_cache_path() == tmp_path / "x.sqlite"
    monkeypatch.delenv("HOID_CACHE")
    assert default_cache_path().parts[-3:] == (".cache", "hoid", "measure.sqlite")


def _writer(path: str, worker: int, count: int) -> None:
    with MeasureCache(path) as cache:
        for i in range(count):
            cache.put(key(params={"worker": worker, "i": i}), Timing.of(1e-6 * (i + 1)))


# The children only touch sqlite, so forking a process that holds torch's threads is safe here (and a
# spawned child would spend seconds importing torch again).
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:DeprecationWarning")
def test_concurrent_writer_processes_lose_nothing(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(path, w, 40)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with MeasureCache(path) as cache:
        entries = cache.entries(kernel="torch.rmsnorm")
    assert len(entries) == 4 * 40
    assert {e.key.params for e in entries} == {key(params={"worker": w, "i": i}).params
                                               for w in range(4) for i in range(40)}


def test_merge_takes_new_keys_and_newer_measurements(tmp_path):
    here, there = tmp_path / "here.sqlite", tmp_path / "there.sqlite"
    with MeasureCache(here) as a:
        a.put(key(params={"only": "here"}), Timing.of(1.0))
        a.put(key(), Timing.of(2.0))
    time.sleep(0.01)
    with MeasureCache(there) as b:
        b.put(key(), Timing.of(3.0))  # newer than here's
        b.put(key(params={"only": "there"}), Timing.of(4.0))
        b.put_choice(key(), {"BLOCK": 128}, 3.0, tried=4)
    with MeasureCache(here) as a:
        assert a.merge(there) == 3
        assert a.get(key()).median == 3.0
        assert a.get(key(params={"only": "here"})).median == 1.0
        assert a.get(key(params={"only": "there"})).median == 4.0
        assert a.get_choice(key()).params == {"BLOCK": 128}
        assert a.merge(there) == 0  # nothing newer the second time


def test_snapshot_carries_everything_while_the_cache_stays_open(tmp_path):
    with MeasureCache(tmp_path / "live.sqlite") as live:
        live.put(key(), Timing.of(7.0))
        live.put_choice(key(), {"BLOCK": 64}, 7.0, tried=2)
        carried = live.snapshot(tmp_path / "carry" / "to_gpu.sqlite")
        live.put(key(params={"after": 1}), Timing.of(8.0))  # still writable
        with pytest.raises(FileExistsError, match="snapshot writes a new file"):
            live.snapshot(carried)
    with MeasureCache(tmp_path / "other.sqlite") as other:
        assert other.merge(carried) == 2
        assert other.get(key()).median == 7.0 and other.get_choice(key()).params == {"BLOCK": 64}
        assert other.get(key(params={"after": 1})) is None


def test_merge_keeps_our_newer_measurement(tmp_path):
    old, new = tmp_path / "old.sqlite", tmp_path / "new.sqlite"
    with MeasureCache(old) as a:
        a.put(key(), Timing.of(5.0))
    time.sleep(0.01)
    with MeasureCache(new) as b:
        b.put(key(), Timing.of(6.0))
        assert b.merge(old) == 0
        assert b.get(key()).median == 6.0


def test_merge_refuses_missing_and_foreign_files(tmp_path):
    foreign = tmp_path / "foreign.sqlite"
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    with MeasureCache(tmp_path / "m.sqlite") as cache:
        with pytest.raises(FileNotFoundError, match="no cache file"):
            cache.merge(tmp_path / "absent.sqlite")
        with pytest.raises(ValueError, match="not a hoid measurement cache"):
            cache.merge(foreign)


def test_corrupt_file_is_refused_with_the_fix(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ValueError, match="HOID_CACHE"):
        MeasureCache(bad)


def test_efficiency_is_the_median_over_measurements_with_a_floor(tmp_path):
    with MeasureCache(tmp_path / "m.sqlite") as cache:
        assert cache.efficiency("NVIDIA H200", "torch.rmsnorm") is None
        cache.put(key(params={"i": 0}), Timing.of(2.0), floor=1.0)
        cache.put(key(params={"i": 1}), Timing.of(4.0), floor=1.0)
        cache.put(key(params={"i": 2}), Timing.of(1.0), floor=1.0)
        cache.put(key(params={"i": 3}), Timing.of(9.0))  # no floor: no efficiency figure
        assert cache.efficiency("NVIDIA H200", "torch.rmsnorm") == pytest.approx(0.5)
        assert cache.efficiency("cpu", "torch.rmsnorm") is None
