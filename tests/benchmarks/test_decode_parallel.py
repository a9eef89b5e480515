"""benchmarks/decode_parallel.py: a run's slices, each a `decode.py` process whose arguments say the same run."""

import pytest

pytest.importorskip("transformers")

import decode_args  # noqa: E402
import decode_parallel  # noqa: E402


def test_every_shape_gets_each_group_it_selects_longest_group_first():
    args = decode_args.parse(["qwen3-1.7b", "--prompt", "128", "1024", "--batch", "1", "--gpus", "2"])
    every = decode_args.GROUPS["stock"] + decode_args.GROUPS["hoid"]
    assert decode_parallel.slices(args, every) == [(128, 1, "hoid"), (1024, 1, "hoid"), (128, 1, "hf"),
                                                   (1024, 1, "hf"), (128, 1, "fast"), (1024, 1, "fast")]
    some_fast = decode_args.GROUPS["fast"][:2]  # part of a group: its rows by name
    assert decode_parallel.slices(args, some_fast) == [(p, 1, ",".join(some_fast)) for p in (128, 1024)]


def test_a_slice_s_arguments_are_the_run_s_narrowed_to_its_shape_and_rows(tmp_path):
    args = decode_args.parse(["qwen3-1.7b", "--prompt", "128", "1024", "--new", "64", "--no-warm", "--agent",
                              "library", "--out", str(tmp_path), "--gpus", "2"])
    child = decode_args.parse(decode_parallel.child_argv(args, 1024, 8, "hoid"))
    assert (child.prompt, child.batch, child.rows, child.new) == ([1024], [8], "hoid", 64)
    assert child.no_warm and child.agent == "library" and child.no_write_reference and child.gpus == 1
    assert child.reference == tmp_path / "reference.json"  # each slice checks against the run's reference
    assert decode_args.output_name(child) == "decode-qwen3-1.7b-p1024-b8-n64-hoid-nowarm.json"
