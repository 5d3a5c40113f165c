"""`tf.distribute` setup for `train(..., distribute="none" | "mirrored" | "multiworker")`.

`none` is TensorFlow's default (single-device) strategy, `mirrored` a `MirroredStrategy` over the
host's GPUs (or its logical CPU devices when it has no GPU), `multiworker` a
`MultiWorkerMirroredStrategy` over the hosts named in the `TF_CONFIG` environment variable. The
train loop runs the same code under all three: variables created in `strategy.scope()`, the
input from `distribute_datasets_from_function`, the step through `strategy.run`.

`batch_size` is the global batch: batch number `step` of the `BatchPlan` is cut into
`num_replicas_in_sync` equal row slices, replica `r` (counted across all workers) taking slice
`r`, so every replica set sees exactly the examples a single device would.
"""

from __future__ import annotations

import json
import os

import numpy as np
import tensorflow as tf

from keras_attn.errors import ConfigError
from keras_attn.training.data import BatchOrder

STRATEGIES = ("none", "mirrored", "multiworker")


def make_strategy(name: str) -> tf.distribute.Strategy:
    """The strategy called `name` (one of `STRATEGIES`).

    `multiworker` must be created before TensorFlow runs its first op (TensorFlow configures
    collective ops at startup), so call this first thing in a process.

    Raises:
        keras_attn.errors.ConfigError: for an unknown name, or `multiworker` without a usable
            `TF_CONFIG`.
    """
    if name not in STRATEGIES:
        raise ConfigError(
            f"Expected distribute in {list(STRATEGIES)}. Received: distribute={name!r}",
            ["distribute"],
        )
    if name == "none":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy([device.name for device in devices])
    _check_tf_config(os.environ.get("TF_CONFIG"))
    return tf.distribute.MultiWorkerMirroredStrategy()


def _check_tf_config(raw: str | None) -> None:
    if not raw:
        raise ConfigError(
            "distribute='multiworker' needs TF_CONFIG, e.g. "
            '{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
            '"task": {"type": "worker", "index": 0}}',
            ["distribute"],
        )
    try:
        tf_config = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ConfigError(f"TF_CONFIG is not valid JSON: {error}") from None
    cluster = tf_config.get("cluster") if isinstance(tf_config, dict) else None
    task = tf_config.get("task") if isinstance(tf_config, dict) else None
    if not isinstance(cluster, dict) or not (cluster.get("worker") or cluster.get("chief")):
        raise ConfigError("TF_CONFIG has no cluster with 'worker' (or 'chief') addresses")
    if not isinstance(task, dict) or task.get("type") not in cluster:
        raise ConfigError(
            f"TF_CONFIG's task {task!r} is not one of its cluster's jobs {sorted(cluster)}"
        )
    index = task.get("index", 0)
    if not isinstance(index, int) or not 0 <= index < len(cluster[task["type"]]):
        raise ConfigError(
            f"TF_CONFIG's task index {index!r} is outside its {task['type']} list "
            f"({len(cluster[task['type']])} addresses)"
        )


def check_global_batch(batch_size: int, replicas: int) -> None:
    """`batch_size` is global: it must split evenly over the replicas."""
    if batch_size % replicas:
        raise ConfigError(
            f"batch_size={batch_size} (the global batch) does not split evenly over "
            f"{replicas} replicas",
            ["batch_size"],
        )


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes the run directory (always, except non-chief workers)."""
    return bool(strategy.extended.should_checkpoint)


def barrier(strategy: tf.distribute.Strategy, ok: bool = True) -> bool:
    """Wait until every worker gets here; returns whether all of them passed `ok=True`.

    One all-reduce of a number across the workers (free on one worker). A worker that failed
    still calls it, with `ok=False`, so the others learn of it instead of waiting for ever.
    """
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return ok
    failures = strategy.run(lambda: tf.constant(0.0 if ok else 1.0))
    return float(strategy.reduce(tf.distribute.ReduceOp.SUM, failures, axis=None)) == 0.0


def distributed_batches(
    strategy: tf.distribute.Strategy, plan: BatchOrder, start_step: int, stop_step: int
):
    """Batches `start_step … stop_step - 1` of `plan`, each split over the replicas.

    Every replica gets `(features, labels, tokens)`: its rows of the global batch (padded to the
    global batch's width) and `tokens`, the number of non-padding labels in the whole global
    batch, by which a replica divides its summed loss so that the sum over replicas is the
    global batch's mean.
    """
    signature = (plan.feature_spec, plan.label_spec, tf.TensorSpec((), tf.float32))

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        replicas = context.num_replicas_in_sync
        local = replicas // context.num_input_pipelines
        first = context.input_pipeline_id * local
        rows = plan.batch_size // replicas

        def generate():
            for features, labels in plan.iterate(start_step, stop_step):
                tokens = np.float32(plan.count_labels(labels))
                # A worker's pipeline hands successive elements to its local replicas in turn.
                for replica in range(first, first + local):
                    part = slice(replica * rows, (replica + 1) * rows)
                    mine = tf.nest.map_structure(lambda v, p=part: v[p], features)
                    theirs = tf.nest.map_structure(lambda v, p=part: v[p], labels)
                    yield mine, theirs, tokens

        return tf.data.Dataset.from_generator(generate, output_signature=signature).prefetch(
            4 * local
        )

    return strategy.distribute_datasets_from_function(dataset_fn)
