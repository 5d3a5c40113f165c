"""Request metrics in the Prometheus text format, named as stock TensorFlow Serving names them.

Stock (tensorflow/serving `servables/tensorflow/util.cc`) keeps `/tensorflow/serving/request_count`
(a counter by `model_name`, `status`) and `/tensorflow/serving/request_latency` (a histogram of
microseconds by `model_name`, `API`, `entrypoint`, buckets 10 * 1.8^i for i < 33); its Prometheus
exporter (`util/prometheus_exporter.cc`) writes the names with `:` for `/`. Both are kept here
under those names, plus `:keras_attn:serving:request_latency`, the same histogram by
`model_name`, `signature_name`, `API`, `entrypoint` and `status`, so a dashboard can split
latency by signature and outcome. `:tensorflow:core:xla_compilations`, TensorFlow's count of XLA
compilations in the process (`keras_attn.serving.xla.xla_compilations`), is exported as stock's
exporter exports it: it stays flat once compiled exports have warmed up.

The values are `prometheus_client` metrics in a `CollectorRegistry` of each `Metrics` (never the
process-wide default registry, so two servers in one process count apart). The page itself is
written from that registry's samples here, in stock's form: `prometheus_client.generate_latest`
would name the counter `:tensorflow:serving:request_count_total`, add `_created` series and sort
the labels, while dashboards made for stock TensorFlow Serving query stock's names.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from keras_attn.serving.xla import xla_compilations

REQUEST_COUNT = ":tensorflow:serving:request_count"
REQUEST_LATENCY = ":tensorflow:serving:request_latency"
SIGNATURE_LATENCY = ":keras_attn:serving:request_latency"
XLA_COMPILATIONS = ":tensorflow:core:xla_compilations"
BUCKETS = tuple(10 * 1.8**i for i in range(33))  # microseconds, as stock


class _XlaCompilations(Collector):
    """TensorFlow's process-wide XLA compilation counter, read at every scrape (nothing where
    the TensorFlow build does not let it be read)."""

    def collect(self):
        try:
            count = xla_compilations()
        except RuntimeError:
            return
        yield CounterMetricFamily(
            XLA_COMPILATIONS,
            "The number of XLA compilations used to collect "
            "/tensorflow/core/xla_compilation_time_usecs",
            value=count,
        )


def _labels(labels: Mapping[str, str]) -> str:
    """`{name="value",...}` in the metric's label order (the bucket bound `le` last); nothing
    for a metric without labels."""
    parts = []
    for name, value in labels.items():
        if name == "le" and value != "+Inf":
            value = _number(float(value))
        parts.append(f'{name}="{_escape(value)}"')
    return "{" + ",".join(parts) + "}" if parts else ""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    """A whole number without a decimal point (`4`, `10`), any other as Python writes it."""
    return repr(float(value)) if value != int(value) else str(int(value))


class Metrics:
    """Request counters and latency histograms of one server (thread-safe).

    Attributes:
        registry: the `prometheus_client.CollectorRegistry` holding this server's metrics.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._requests = Counter(
            REQUEST_COUNT,
            "The total number of requests.",
            ("model_name", "status"),
            registry=self.registry,
        )
        self._latency = Histogram(
            REQUEST_LATENCY,
            "Distribution of wall time (in microseconds) for TensorFlow Serving request.",
            ("model_name", "API", "entrypoint"),
            buckets=BUCKETS,
            registry=self.registry,
        )
        self._by_signature = Histogram(
            SIGNATURE_LATENCY,
            "Distribution of wall time (in microseconds) by signature and status.",
            ("model_name", "signature_name", "API", "entrypoint", "status"),
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_XlaCompilations())

    def record(
        self,
        model_name: str,
        signature_name: str,
        api: str,
        entrypoint: str,
        status: str,
        latency_seconds: float,
    ) -> None:
        """Counts one request.

        Args:
            model_name: `ModelSpec.name` of the request.
            signature_name: the signature it ran (`serving_default` when none was named).
            api: `Predict`, `Classify`, `Regress`, `MultiInference` or `GetModelMetadata`.
            entrypoint: `GRPC` or `REST`.
            status: the status code name, e.g. `OK`, `INVALID_ARGUMENT`.
            latency_seconds: wall time of the request.
        """
        micros = latency_seconds * 1e6
        self._requests.labels(model_name, status).inc()
        self._latency.labels(model_name, api, entrypoint).observe(micros)
        self._by_signature.labels(model_name, signature_name, api, entrypoint, status).observe(
            micros
        )

    def count(self, model_name: str, status: str) -> int:
        """Requests counted for a model with a status."""
        labels = {"model_name": model_name, "status": status}
        return int(self.registry.get_sample_value(f"{REQUEST_COUNT}_total", labels) or 0)

    def exposition(self) -> str:
        """Every metric in the Prometheus text exposition format (version 0.0.4), as stock."""
        lines = []
        for family in self.registry.collect():
            lines.append(f"# TYPE {family.name} {family.type}")
            for sample in family.samples:
                if sample.name.endswith("_created"):
                    continue
                name = family.name if family.type == "counter" else sample.name
                lines.append(f"{name}{_labels(sample.labels)} {_number(sample.value)}")
        return "\n".join(lines) + "\n"
