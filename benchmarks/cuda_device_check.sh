#!/usr/bin/env bash
# The CUDA engine's checks and figures on a GPU machine, in one run (issue 30):
#   bash benchmarks/cuda_device_check.sh [OUT_DIR] [STEPS]
# STEPS (default "cases bench"): cases = the cases of tests/cuda_cases.py (all, or those named
# in $CASES) bit for bit against the CPU engine; bench = bench_fabric.py --engine cuda at 1 and
# 30 % load, 128 x 128 and 1024 x 1024, 10^4 cycles, each device layout ($LAYOUTS, default
# "rows router") and launch ($LAUNCHES, default "auto"), beside the one-launch-a-cycle plain
# kernel (the first of them only);
# profile = Nsight Compute on one 200-cycle launch at 128 x 128 and 1024 x 1024 (ncu_K.txt);
# jitcache = benchmarks/cuda_jit_cache.py (start-up with and without the kernels' disk cache);
# wafer = a GPT-3 175B layer's forward QKV GEMM (batch 1: m = 2048 tokens, k = 12288,
# n = 36864, fp16) on the whole wse2 grid with a defect map (1 defect/cm^2), its first
# $WAFER_CYCLES cycles (default 10^5) on the GPU, projected and compared with the fast tier
# (wafer.json; issue 30, item 3).
# Where the machine's numba-cuda does not import, wheels in .whl/ (numpy<2.5, numba-cuda) are
# installed first. Logs go to OUT_DIR (default out/cuda).
set -uo pipefail
out=${1:-out/cuda}
steps=${2:-cases bench}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
probe='import numba, numpy, numba.cuda as c, importlib.metadata as m
print("numba", numba.__version__, "numba-cuda", m.version("numba-cuda"), "numpy",
      numpy.__version__, "GPU", c.is_available(), getattr(c, "implementation", "?"))
assert c.is_available() and c.implementation == "NVIDIA"
assert tuple(map(int, numpy.__version__.split(".")[:2])) < (2, 5), "numba-cuda needs numpy<2.5"'
if ! python3 -c "$probe"; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
  echo "import site; site.addsitedir('/tmp/site')" > /tmp/site/sitecustomize.py  # its .pth
  export PYTHONPATH=/tmp/site:$PYTHONPATH
  python3 -c "$probe" || exit 3
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
failed=0
for step in $steps; do
  case $step in
    cases) timeout 400 python3 tests/cuda_cases.py ${CASES:-} 2>&1 | tee "$out/cases.log" || failed=1 ;;
    wafer)
      timeout 580 python3 -m wafersim.cli kernel gemm --grid wafer --m 2048 --k 12288 --n 36864 \
        --dtype fp16 --defect-density-per-cm2 1 --spare-rows 4 --engine cuda \
        --stop-at "${WAFER_CYCLES:-100000}" --json > "$out/wafer.json" 2> "$out/wafer.log" \
        || failed=1
      tail -3 "$out/wafer.log"; head -c 3000 "$out/wafer.json"; echo ;;
    jitcache)
      timeout 300 python3 benchmarks/cuda_jit_cache.py 2>&1 | tee "$out/jitcache.log" || failed=1 ;;
    bench)
      plain=--plain
      for layout in ${LAYOUTS:-rows router}; do
        for launch in ${LAUNCHES:-auto}; do
          timeout 300 python3 benchmarks/bench_fabric.py --engine cuda --layout "$layout" \
            --launch "$launch" --sizes 128 1024 --loads 0.01 0.3 --cycles 10000 $plain \
            --out "$out/bench_fabric_${layout}_$launch.json" 2>&1 \
            | tee "$out/bench_${layout}_$launch.log" || failed=1
          plain=
        done
      done ;;
    profile)
      ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
      for k in 128 1024; do
        timeout 200 "$ncu" --clock-control none --kernel-name regex:run_cycles --launch-skip 3 \
          --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
          --section Occupancy --section WarpStateStats --section LaunchStats \
          python3 benchmarks/profile_cuda.py --sizes $k --cycles 200 --layout rows \
          > "$out/ncu_$k.txt" 2>&1 || failed=1
        grep -E "Duration|Throughput|Achieved Occupancy|Registers|Stall|L1/TEX Hit|L2 Hit|Warp Cycles|Block Limit|Theoretical Occ|Local" "$out/ncu_$k.txt" | head -40
      done ;;
  esac
done
exit $failed
