#!/usr/bin/env bash
# The GPU checks, in one run on a GPU machine that has python3 with jax (CUDA) and torch but no
# TensorFlow, Keras or network:
#   1. benchmarks/gpu.py: the translator train step and multi-head attention (alone on the GPU);
#   2. experiments/gpu_translator.py train: a Transformer translator trained under JAX and
#      mixed_bfloat16 on the data `gpu_translator.py prepare` wrote into .gpu/data (skipped
#      when .gpu/data is missing), its test split translated;
#   3. meanwhile, the tests marked every_backend (make test's JAX selection) under JAX, then
#      under PyTorch, on the GPU.
# The missing pure-Python packages travel as wheels in .whl/, fetched where pip works with
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#         --implementation cp --platform manylinux_2_28_x86_64 -d .whl keras==3.15.1 \
#         keras-hub==0.32.0 namex==0.1.0 optree==0.20.0 kagglehub==1.0.2 kagglesdk==0.1.28
# Then, from the repository root on the GPU machine (times in seconds, minutes for training;
# GPU_BENCH_S=0 skips the benchmark, GPU_SUITE_BACKENDS names the suites' backends):
#     GPU_BENCH_S=150 GPU_TRAIN_MINUTES=3.5 GPU_SUITE_S=150 bash benchmarks/gpu_device.sh
# Under $OUT (default /tmp/gpu-out): logs.tar.gz (every log, gpu.md/json, the suites' JUnit
# files, gpu_translations.json) and the trained translator.keras in parts of 15 MB
# (translator.keras.part-aa, ...; `cat translator.keras.part-* > translator.keras`).
set -o pipefail
OUT=${OUT:-/tmp/gpu-out}
LOGS=$OUT/logs
mkdir -p "$LOGS"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$PWD KERAS_BACKEND=jax PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv \
    | tee "$LOGS/nvidia-smi.txt"
python3 -c 'import jax, torch; print("jax", jax.__version__, jax.devices(), "torch",
    torch.__version__, torch.cuda.get_device_name())' 2>&1 | tee "$LOGS/versions.txt"

if [ "${GPU_BENCH_S:-150}" != 0 ]; then
    echo "== 1. benchmarks/gpu.py $(date +%T)"
    timeout "${GPU_BENCH_S:-150}" python3 benchmarks/gpu.py --quick --policy mixed_bfloat16 \
        --budget-s "$(( ${GPU_BENCH_S:-150} - 15 ))" --out "$LOGS/gpu.md" >"$LOGS/gpu.log" 2>&1
    echo "gpu.py exit $?"; tail -n 30 "$LOGS/gpu.md"
fi

train=
if [ -d .gpu/data ]; then
    echo "== 2. experiments/gpu_translator.py train $(date +%T)"
    limit=$(python3 -c "print(int(60 * ${GPU_TRAIN_MINUTES:-3.5}) + 240)")  # + compiling, decoding
    XLA_PYTHON_CLIENT_MEM_FRACTION=0.5 timeout "$limit" \
        python3 experiments/gpu_translator.py train --data .gpu/data --out "$OUT/trained" \
        --minutes "${GPU_TRAIN_MINUTES:-3.5}" >"$LOGS/train.log" 2>&1 &
    train=$!
fi

# The every_backend tests, in the directories make test runs them in under JAX.
dirs=$(sed -n '/^JAX_DIRS :=/,/[^\\]$/p' Makefile | sed 's/JAX_DIRS :=//; s/\\//g')
for backend in ${GPU_SUITE_BACKENDS:-jax torch}; do
    echo "== 3. the every_backend tests under $backend $(date +%T)"
    # Full float32 matrix products: the tests compare with NumPy at float32 tolerances, and JAX
    # would otherwise run float32 products in TF32 on the GPU.
    per_test=$(python3 -c "import pytest_timeout" 2>/dev/null && echo --timeout 120)
    KERAS_BACKEND=$backend XLA_PYTHON_CLIENT_PREALLOCATE=false \
        JAX_DEFAULT_MATMUL_PRECISION=highest timeout -s INT "${GPU_SUITE_S:-150}" \
        python3 -m pytest -q -n 6 -m every_backend -p no:cacheprovider $per_test \
        --junitxml="$LOGS/suite_$backend.xml" $dirs >"$LOGS/suite_$backend.log" 2>&1
    echo "exit $?"; tail -n 3 "$LOGS/suite_$backend.log"
done

if [ -n "$train" ]; then
    wait "$train"; echo "training exit $? $(date +%T)"
    grep -v '^[IWE]0000' "$LOGS/train.log" | tail -n 8
    if [ -f "$OUT/trained/translator.keras" ]; then
        split -b 15m "$OUT/trained/translator.keras" "$OUT/translator.keras.part-"
        mv "$OUT/trained/gpu_translations.json" "$LOGS/" 2>/dev/null
        rm -rf "$OUT/trained"
    fi
fi
tar czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$LOGS"
ls -la "$OUT"
