"""`mixed_precision`: what `auto` picks on which device, how the run records it, and `train`
leaving Keras' global dtype policy as it found it."""

import json
import shutil
from types import SimpleNamespace

import keras
import pytest

from keras_attn.errors import ConfigError
from keras_attn.training import precision, trainer
from keras_attn.training.precision import (
    Accelerator,
    accelerators,
    choose_policy,
    dtype_policy,
    resolve_policy,
)
from keras_attn.training.trainer import TrainConfig, train

H100 = Accelerator("GPU", "NVIDIA H100 80GB HBM3", (9, 0))
A100 = Accelerator("GPU", "NVIDIA A100-SXM4-40GB", (8, 0))
RTX3090 = Accelerator("GPU", "NVIDIA GeForce RTX 3090", (8, 6))
T4 = Accelerator("GPU", "Tesla T4", (7, 5))
V100 = Accelerator("GPU", "Tesla V100-SXM2-16GB", (7, 0))
P100 = Accelerator("GPU", "Tesla P100-PCIE-16GB", (6, 0))
UNREPORTED = Accelerator("GPU", "/physical_device:GPU:0")
TPU = Accelerator("TPU", "/physical_device:TPU:0")


@pytest.mark.parametrize(
    "devices,policy",
    [
        ([H100], "mixed_bfloat16"),
        ([A100], "mixed_bfloat16"),
        ([RTX3090, A100], "mixed_bfloat16"),
        ([TPU], "mixed_bfloat16"),
        ([T4], "mixed_float16"),
        ([V100], "mixed_float16"),
        ([P100], "mixed_float16"),
        ([A100, V100], "mixed_float16"),  # every replica runs the policy: the older GPU decides
        ([UNREPORTED], "mixed_float16"),
        ([], "float32"),
    ],
)
def test_auto_picks_by_the_accelerators(devices, policy):
    assert choose_policy(devices).policy == policy
    assert resolve_policy("auto", devices).policy == policy


def test_the_choice_says_why():
    assert choose_policy([A100, V100]).reason == (
        "GPU 'Tesla V100-SXM2-16GB' of compute capability 7.0 predates bfloat16 (8.0)"
    )
    assert choose_policy([H100]).reason == (
        "GPU 'NVIDIA H100 80GB HBM3' of compute capability 9.0 computes in bfloat16"
    )
    assert choose_policy([UNREPORTED]).reason == (
        "GPU '/physical_device:GPU:0' reports no compute capability"
    )
    assert choose_policy([]).reason == "no GPU or TPU"


def test_a_named_policy_is_taken_as_given_and_others_are_refused():
    for name in ("float32", "mixed_float16", "mixed_bfloat16"):
        assert resolve_policy(name, [H100]).policy == name
    with pytest.raises(ConfigError, match="Received: 'fp8'") as caught:
        resolve_policy("fp8")
    assert caught.value.fields == ("mixed_precision",)


def test_accelerators_are_read_from_tensorflow(monkeypatch):
    import tensorflow as tf

    devices = {
        "GPU": [SimpleNamespace(name="/physical_device:GPU:0", device_type="GPU")],
        "TPU": [],
    }
    details = {"device_name": "NVIDIA A10G", "compute_capability": (8, 6)}
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind: devices[kind])
    monkeypatch.setattr(tf.config.experimental, "get_device_details", lambda device: details)
    assert accelerators() == [Accelerator("GPU", "NVIDIA A10G", (8, 6))]
    details.clear()  # what some drivers report
    assert accelerators() == [Accelerator("GPU", "/physical_device:GPU:0", None)]


def test_auto_on_this_machine_follows_its_accelerators():
    assert resolve_policy("auto") == choose_policy(accelerators())


def test_dtype_policy_restores_the_policy_it_found():
    keras.config.set_dtype_policy("bfloat16")
    with dtype_policy("mixed_float16"):
        assert keras.config.dtype_policy().name == "mixed_float16"
    assert keras.config.dtype_policy().name == "bfloat16"
    with pytest.raises(RuntimeError), dtype_policy("mixed_bfloat16"):
        raise RuntimeError("in the block")
    assert keras.config.dtype_policy().name == "bfloat16"
    with pytest.raises(ConfigError):
        dtype_policy("auto").__enter__()


TINY = dict(
    model="rnn-plain", steps=1, batch_size=8, vocab_size=100, eval_sentences=0, warmup_steps=0,
    schedule="cosine", options={"units": 8, "embedding_dim": 8},
)  # fmt: skip


def test_train_records_the_auto_choice_keeps_it_and_restores_the_global_policy(
    tmp_path, tiny_corpus, monkeypatch
):
    run = tmp_path / "run"
    config = TrainConfig(corpus=str(tiny_corpus), **TINY)
    keras.config.set_dtype_policy("bfloat16")  # the caller's policy, not the run's
    monkeypatch.setattr(precision, "accelerators", lambda: [A100])  # as on an A100
    lines = []
    metrics = train(run, config, progress=False, log=lines.append)
    assert keras.config.dtype_policy().name == "bfloat16"
    assert (
        "mixed_precision auto: mixed_bfloat16 (GPU 'NVIDIA A100-SXM4-40GB' of compute "
        "capability 8.0 computes in bfloat16)"
    ) in lines
    assert metrics["precision"] == "mixed_bfloat16"
    saved = json.loads((run / "config.json").read_text())
    assert (saved["mixed_precision"], saved["precision"]) == ("auto", "mixed_bfloat16")

    # A failing resume on another machine: the run's policy while it runs, the caller's after.
    monkeypatch.setattr(precision, "accelerators", lambda: [])
    failing = tmp_path / "failing"
    shutil.copytree(run, failing)
    seen = []

    def fit(*args, **kwargs):
        seen.append(keras.config.dtype_policy().name)
        raise RuntimeError("a bug in the training loop")

    monkeypatch.setattr(trainer, "_fit", fit)
    with pytest.raises(RuntimeError, match="a bug"):
        train(failing, None, resume=True, progress=False, log=lines.append)
    assert seen == ["mixed_bfloat16"]  # the policy the run started with, not float32
    assert keras.config.dtype_policy().name == "bfloat16"

    # A refused request leaves it too.
    with pytest.raises(ConfigError):
        train(tmp_path / "other", TrainConfig(steps=0), progress=False)
    assert keras.config.dtype_policy().name == "bfloat16"
