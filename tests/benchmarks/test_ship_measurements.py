"""`benchmarks/ship_measurements.py`: a run's measurements merged into the shipped cache, stale versions pruned."""

import tarfile

import pytest
import ship_measurements

from hoid.ir import TensorType
from hoid.kernels import all_kernels
from hoid.measure.cache import MeasureCache, MeasureKey
from hoid.measure.timing import Timing


def _key(kernel: str, version: str) -> MeasureKey:
    return MeasureKey.of("NVIDIA H200", kernel, version, {"block_n": 8}, [TensorType((1, 2048), "bf16")])


def _cache(path, *keys):
    with MeasureCache(path) as cache:
        for key in keys:
            cache.put(key, Timing((1e-5, 1.1e-5, 0.9e-5), "cuda-graph"))
    return path


def test_an_archive_is_merged_into_the_shipped_cache_and_stale_versions_are_pruned(tmp_path, capsys):
    current = _key("triton.rmsnorm", all_kernels()["triton.rmsnorm"].version)
    stale = _key("triton.rmsnorm", "000000000000")
    run = _cache(tmp_path / "measure.sqlite", current, stale)
    archive = tmp_path / "hoid-run-x.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(run, arcname="measure.sqlite")
    shipped = tmp_path / "shipped.sqlite"
    assert ship_measurements.main([str(archive), "--into", str(shipped)]) == 0
    assert "2 rows taken" in capsys.readouterr().out
    with MeasureCache(shipped) as cache:
        assert cache.get(current) is not None and cache.get(stale) is not None
    assert ship_measurements.main([str(run), "--into", str(shipped), "--prune"]) == 0
    with MeasureCache(shipped) as cache:
        assert cache.get(current) is not None and cache.get(stale) is None


def test_an_input_that_is_not_a_cache_or_archive_is_refused_with_why(tmp_path):
    bogus = tmp_path / "notes.txt"
    bogus.write_text("hello")
    with pytest.raises(SystemExit, match="neither a measurement cache"):
        ship_measurements.main([str(bogus), "--into", str(tmp_path / "s.sqlite")])
