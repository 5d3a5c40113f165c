#!/usr/bin/env bash
# benchmarks/gpu.py on a GPU machine that has python3 with jax (CUDA) but no TensorFlow, Keras
# or network. The missing pure-Python packages travel as wheels in .whl/, fetched where pip
# works with
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#         --implementation cp --platform manylinux_2_28_x86_64 -d .whl keras==3.15.1 \
#         keras-hub==0.32.0 namex==0.1.0 optree==0.20.0 kagglehub==1.0.2 kagglesdk==0.1.28
# Then, from the repository root on the GPU machine:
#     bash benchmarks/gpu_device.sh [gpu.py options]
# Writes gpu.md, gpu.json, log.txt and nvidia-smi.txt under $OUT (default /tmp/gpu-out).
set -o pipefail
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$PWD KERAS_BACKEND=jax PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv \
    | tee "$OUT/nvidia-smi.txt"
python3 -c 'import jax; print("jax", jax.__version__, jax.devices())'
timeout "${GPU_BENCH_TIMEOUT_S:-480}" python3 benchmarks/gpu.py --out "$OUT/gpu.md" "$@" 2>&1 \
    | tee "$OUT/log.txt"
