"""`benchmarks/moe_grouped_emulation.py` on the CPU: at a seed whose draw cancels large partials (1112) the check
accepts the split form, and the run writes what it found. (Whether it refuses the rounded activations there
depends on torch's own CPU summation order, which the thread count changes: the committed run's JSON says.)"""

import json


def test_the_split_form_passes_a_cancelling_draw_and_the_run_is_written(tmp_path):
    import moe_grouped_emulation

    assert moe_grouped_emulation.main(["split", "1112", "1113", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "moe-grouped-emulation-split-1112-1113.json").read_text())
    assert result["failed"] == 0 and result["failures"] == [] and result["seeds"] == [1112, 1113]
