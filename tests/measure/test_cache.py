"""The measurement cache: keys, reload, concurrent writers (processes), merge, efficiency, choices, the
Triton and torch versions in the key, explained misses, and the migration of schema-0 files."""

import multiprocessing
import sqlite3
import time

import pytest

from hoid.ir import TensorType
from hoid.measure.cache import MeasureCache, MeasureKey, default_cache_path, installed_versions
from hoid.measure.timing import Timing

TYPES = [TensorType((4, 64), "bf16"), TensorType((64,), "bf16")]


def key(kernel="torch.rmsnorm", params=None, device="NVIDIA H200", version="abc123", attrs=None, **versions):
    attrs = attrs if attrs is not None else {"eps": 1e-6}
    return MeasureKey.of(device, kernel, version, params or {}, TYPES, attrs, **versions)


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
                key(params={"BLOCK": 64}), key(attrs={"eps": 1e-5}), key(triton="0.0.1"), key(torch="0.0.1")}
    assert len(variants) == 8
    assert (key().triton, key().torch) == installed_versions()
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


def test_forget_drops_one_kernel_version_measurements_and_choices_alike(tmp_path):
    with MeasureCache(tmp_path / "m.sqlite") as cache:
        for version in ("old", "new"):
            cache.put(key(version=version), Timing((1e-6,), "cuda-graph"))
            cache.put_choice(key(version=version), {"BLOCK": 64}, 1e-6, 3)
        assert cache.forget("torch.rmsnorm", "old") == 2
        assert cache.get(key(version="old")) is None and cache.get_choice(key(version="old")) is None
        assert cache.get(key(version="new")) is not None and cache.get_choice(key(version="new")) is not None


def test_carry_copies_one_kernel_version_rows_to_another_and_keeps_what_is_there(tmp_path):
    with MeasureCache(tmp_path / "m.sqlite") as cache:
        cache.put(key(version="old"), Timing.of(1.0))
        cache.put(key(version="old", params={"BLOCK": 64}), Timing.of(2.0))
        cache.put_choice(key(version="old"), {"BLOCK": 64}, 2.0, 3)
        cache.put(key(version="new", params={"BLOCK": 64}), Timing.of(5.0))  # measured at the new version
        cache.put(key(kernel="torch.other", version="old"), Timing.of(7.0))
        assert cache.carry("torch.rmsnorm", "old", "new") == 2  # one measurement and the choice
        assert cache.get(key(version="new")).median == 1.0
        assert cache.get(key(version="new", params={"BLOCK": 64})).median == 5.0
        assert cache.get_choice(key(version="new")).params == {"BLOCK": 64}
        assert cache.get(key(version="old")).median == 1.0  # the old rows stay
        assert cache.get(key(kernel="torch.other", version="new")) is None


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


# --- versions: a measurement under another kernel, Triton or torch version is not used, and says so ---

@pytest.mark.parametrize("other, said", [({"triton": "3.0.0"}, "triton 3.0.0 (now"),
                                         ({"torch": "2.0.0+cu118"}, "torch 2.0.0+cu118 (now"),
                                         ({"version": "old0001"}, "kernel version old0001 (now abc123)")])
def test_a_measurement_under_other_versions_is_not_used_and_the_miss_says_why(tmp_path, other, said):
    with MeasureCache(tmp_path / "m.sqlite") as cache:
        cache.put(key(**other), Timing.of(1e-6))
        assert cache.get(key(**other)).median == 1e-6  # there, under the versions it was measured with
        assert cache.get(key()) is None
        why = cache.explain_miss(key())
        assert said in why and "torch.rmsnorm on bf16[4,64];bf16[64] was measured under" in why
        assert cache.explain_miss(key(**other)) is None  # a hit needs no explaining
        assert cache.explain_miss(key(params={"BLOCK": 64})) is None  # never measured: a plain miss


def test_the_explanation_names_the_newest_row_and_counts_the_others(tmp_path):
    with MeasureCache(tmp_path / "m.sqlite") as cache:
        cache.put(key(torch="2.0.0"), Timing.of(1.0))
        time.sleep(0.01)
        cache.put(key(torch="2.1.0"), Timing.of(1.0))
        why = cache.explain_miss(key(torch="2.2.0"))
        assert "torch 2.1.0 (now 2.2.0)" in why and "1 older rows" in why


def test_a_choice_tuned_under_another_torch_is_not_used_and_the_miss_says_why(tmp_path):
    with MeasureCache(tmp_path / "m.sqlite") as cache:
        cache.put_choice(key(torch="2.0.0"), {"BLOCK": 128}, 1e-6, tried=3)
        assert cache.get_choice(key()) is None
        assert "was tuned under torch 2.0.0" in cache.explain_miss(key(), choice=True)
        assert cache.explain_miss(key()) is None  # no measurement of it at all


def test_efficiency_counts_only_measurements_under_the_installed_versions(tmp_path):
    with MeasureCache(tmp_path / "m.sqlite") as cache:
        cache.put(key(params={"i": 0}, torch="2.0.0"), Timing.of(10.0), floor=1.0)
        assert cache.efficiency("NVIDIA H200", "torch.rmsnorm") is None
        cache.put(key(params={"i": 1}), Timing.of(2.0), floor=1.0)
        assert cache.efficiency("NVIDIA H200", "torch.rmsnorm") == pytest.approx(0.5)


_SCHEMA0 = ("""CREATE TABLE measurements (
    device TEXT NOT NULL, kernel TEXT NOT NULL, version TEXT NOT NULL,
    params TEXT NOT NULL, types TEXT NOT NULL, attrs TEXT NOT NULL,
    median REAL NOT NULL, spread REAL NOT NULL, runs INTEGER NOT NULL, method TEXT NOT NULL,
    floor REAL, measured_at REAL NOT NULL,
    PRIMARY KEY (device, kernel, version, params, types, attrs))""", """CREATE TABLE choices (
    device TEXT NOT NULL, kernel TEXT NOT NULL, version TEXT NOT NULL, params TEXT NOT NULL,
    types TEXT NOT NULL, attrs TEXT NOT NULL, median REAL NOT NULL, tried INTEGER NOT NULL,
    measured_at REAL NOT NULL,
    PRIMARY KEY (device, kernel, version, types, attrs))""")


def _schema0_file(path):
    """A cache file as hoid wrote it before the key held Triton and torch versions."""
    k = key()
    db = sqlite3.connect(path)
    for statement in _SCHEMA0:
        db.execute(statement)
    db.execute("INSERT INTO measurements VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
               (k.device, k.kernel, k.version, k.params, k.types, k.attrs, 2e-6, 1e-7, 20, "cuda-graph", 1e-6, 1.0))
    db.execute("INSERT INTO choices VALUES (?,?,?,?,?,?,?,?,?)",
               (k.device, k.kernel, k.version, '{"BLOCK":64}', k.types, k.attrs, 2e-6, 4, 1.0))
    db.commit()
    db.close()
    return path


def test_a_schema0_file_is_migrated_its_rows_kept_but_never_used(tmp_path):
    path = _schema0_file(tmp_path / "old.sqlite")
    with MeasureCache(path) as cache:
        (entry,) = cache.entries()
        assert (entry.key.triton, entry.key.torch, entry.median) == ("unknown", "unknown", 2e-6)
        assert cache.get(key()) is None and cache.get_choice(key()) is None
        assert "unknown triton and torch versions" in cache.explain_miss(key())
        assert "unknown triton and torch versions" in cache.explain_miss(key(), choice=True)
        assert cache.efficiency("NVIDIA H200", "torch.rmsnorm") is None
        cache.put(key(), Timing.of(3e-6))  # the current versions' row lives beside the old one
    with MeasureCache(path) as cache:  # opened again: migrated already, nothing lost
        assert cache.get(key()).median == 3e-6 and len(cache.entries()) == 2
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    assert not [n for (n,) in db.execute("SELECT name FROM sqlite_master") if "schema0" in n]
    db.close()


def test_merge_reads_a_schema0_file_as_migrated(tmp_path):
    old = _schema0_file(tmp_path / "old.sqlite")
    with MeasureCache(tmp_path / "new.sqlite") as cache:
        assert cache.merge(old) == 2
        assert [e.key.torch for e in cache.entries()] == ["unknown"]
        assert cache.get(key()) is None and "unknown" in cache.explain_miss(key())


def test_a_file_of_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "future.sqlite"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=99")
    db.close()
    with pytest.raises(ValueError, match="newer hoid"):
        MeasureCache(path)


def test_the_suite_keeps_out_of_the_users_own_cache_and_store():
    """conftest points both at a temporary folder: running the tests leaves ~/.cache/hoid as it was."""
    from pathlib import Path

    from hoid.kernels.store import default_store_path
    from hoid.measure.cache import default_cache_path

    home = Path.home() / ".cache" / "hoid"
    assert home not in default_cache_path().parents and home not in default_store_path().parents
