#!/usr/bin/env bash
# The CuTe kernels' GPU checks and benchmark on the H200, which has no network and no CuTe DSL: first
# `../shared/tools/gpu-wheels` (.whl/: egglog, openai) and `--cute` (.cute1/, .cute2/) here, then on the
# machine gpu-wheels' two CuTe steps (they fill /tmp/cute), then this, from the repository root with .whl/
# carried; each part fits one 10-minute command:
#   bash benchmarks/cute_h200.sh tests    # GPU tests + the CPU build tests, ~4 min (CuTe compiles ~1-10 s a shape)
#   bash benchmarks/cute_h200.sh bench    # benchmarks/kernels_cute.py without the whole model, ~5 min
#   bash benchmarks/cute_h200.sh model    # Qwen3-1.7B decode tokens/s, CuTe GEMVs against Triton's, ~4 min
# Results go to $OUT when set (what the device tool brings back), else benchmarks/results.
set -euo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
# CuTe DSL installs through a .pth file, which PYTHONPATH does not read: a sitecustomize on the path adds its
# site dir to every python3 started below (pytest, check_kernel's isolated children, the benchmark).
echo "import site; site.addsitedir('/tmp/cute')" > /tmp/site/sitecustomize.py
export PYTHONPATH=$PWD:/tmp/site HOID_REQUIRE_CUTE=1 PYTHONUNBUFFERED=1
out=${OUT:-benchmarks/results}
mkdir -p "$out"
python3 -c "import cutlass, cutlass.cute, torch; print('CuTe DSL', cutlass.__version__, torch.cuda.get_device_name())"
case ${1:-tests} in
  tests) python3 -m pytest -q -p no:cacheprovider tests/kernels/library/test_cute_gpu.py \
           tests/kernels/library/test_cute_compile.py 2>&1 | tee "$out/kernels_cute_gpu_tests.txt" ;;
  bench) python3 benchmarks/kernels_cute.py --out "$out" --parts decode,prefill ;;
  model) cp benchmarks/results/kernels_cute.json "$out/" 2>/dev/null || true
         python3 benchmarks/kernels_cute.py --out "$out" --parts model ;;
  *) echo "usage: $0 tests|bench|model" >&2; exit 2 ;;
esac
