"""Request metrics: stock TensorFlow Serving's names and labels, one registry per server."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from keras_attn.serving.metrics import (
    BUCKETS,
    REQUEST_COUNT,
    REQUEST_LATENCY,
    SIGNATURE_LATENCY,
    XLA_COMPILATIONS,
    Metrics,
)
from keras_attn.serving.xla import xla_compilations


def test_the_page_uses_stock_names_and_parses_as_prometheus_text():
    metrics = Metrics()
    metrics.record("translator", "translate", "Predict", "GRPC", "OK", 0.0001)  # 100 us
    metrics.record("translator", "translate", "Predict", "GRPC", "OK", 0.002)
    metrics.record("translator", "nope", "Predict", "REST", "FAILED_PRECONDITION", 0.0)
    page = metrics.exposition()
    lines = page.splitlines()
    assert f"# TYPE {REQUEST_COUNT} counter" in lines
    assert f'{REQUEST_COUNT}{{model_name="translator",status="OK"}} 2' in lines
    assert not any("_total" in line or "_created" in line for line in lines)
    grpc = 'model_name="translator",API="Predict",entrypoint="GRPC"'
    assert f'{REQUEST_LATENCY}_bucket{{{grpc},le="10"}} 0' in lines
    assert f'{REQUEST_LATENCY}_bucket{{{grpc},le="104.976"}} 1' in lines
    assert f'{REQUEST_LATENCY}_bucket{{{grpc},le="+Inf"}} 2' in lines
    assert f"{REQUEST_LATENCY}_count{{{grpc}}} 2" in lines

    families = {family.name: family for family in text_string_to_metric_families(page)}
    assert set(families) == {REQUEST_COUNT, REQUEST_LATENCY, SIGNATURE_LATENCY, XLA_COMPILATIONS}
    by_signature = [
        sample
        for sample in families[SIGNATURE_LATENCY].samples
        if sample.name.endswith("_count") and sample.labels["status"] == "FAILED_PRECONDITION"
    ]
    assert [(s.labels["signature_name"], s.value) for s in by_signature] == [("nope", 1.0)]
    assert len(BUCKETS) == 33 and BUCKETS[0] == 10


def test_each_server_counts_apart():
    first, second = Metrics(), Metrics()
    first.record("m", "s", "Predict", "GRPC", "OK", 0.001)
    assert (first.count("m", "OK"), second.count("m", "OK"), first.count("m", "NOT_FOUND")) == (
        1,
        0,
        0,
    )
    assert first.registry is not second.registry


def test_the_page_counts_the_xla_compilations_of_the_process():
    import tensorflow as tf

    def page_count(metrics):
        line = next(x for x in metrics.exposition().splitlines() if x.startswith(XLA_COMPILATIONS))
        return int(line.split()[-1])

    metrics = Metrics()
    before = page_count(metrics)
    assert before == xla_compilations()
    function = tf.function(lambda x: tf.reduce_sum(x * 2.0), jit_compile=True)
    function(tf.ones([3]))
    function(tf.ones([3]))  # the same shape: no compilation
    assert page_count(metrics) == before + 1
    function(tf.ones([5]))  # a new shape compiles once more
    assert page_count(metrics) == xla_compilations() == before + 2
