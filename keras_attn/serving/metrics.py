"""Request metrics in the Prometheus text format, named as stock TensorFlow Serving names them.

Stock (tensorflow/serving `servables/tensorflow/util.cc`) keeps `/tensorflow/serving/request_count`
(a counter by `model_name`, `status`) and `/tensorflow/serving/request_latency` (a histogram of
microseconds by `model_name`, `API`, `entrypoint`, buckets 10 * 1.8^i for i < 33); its Prometheus
exporter (`util/prometheus_exporter.cc`) writes the names with `:` for `/`. Both are kept here
under those names, plus `:keras_attn:serving:request_latency`, the same histogram by
`model_name`, `signature_name`, `API`, `entrypoint` and `status`, so a dashboard can split
latency by signature and outcome.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence

REQUEST_COUNT = ":tensorflow:serving:request_count"
REQUEST_LATENCY = ":tensorflow:serving:request_latency"
SIGNATURE_LATENCY = ":keras_attn:serving:request_latency"
BUCKETS = tuple(10 * 1.8**i for i in range(33))  # microseconds, as stock


class _Histogram:
    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0
        self.count = 0

    def add(self, value: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, value)] += 1
        self.total += value
        self.count += 1


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return repr(float(value)) if value != int(value) else str(int(value))


class Metrics:
    """Thread-safe request counters and latency histograms."""

    _LATENCY_LABELS = ("model_name", "API", "entrypoint")
    _SIGNATURE_LABELS = ("model_name", "signature_name", "API", "entrypoint", "status")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}
        self._latency: dict[tuple[str, ...], _Histogram] = {}
        self._by_signature: dict[tuple[str, ...], _Histogram] = {}

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
        with self._lock:
            key = (model_name, status)
            self._counts[key] = self._counts.get(key, 0) + 1
            self._latency.setdefault((model_name, api, entrypoint), _Histogram()).add(micros)
            signature_key = (model_name, signature_name, api, entrypoint, status)
            self._by_signature.setdefault(signature_key, _Histogram()).add(micros)

    def count(self, model_name: str, status: str) -> int:
        """Requests counted for a model with a status."""
        with self._lock:
            return self._counts.get((model_name, status), 0)

    def exposition(self) -> str:
        """Every metric in the Prometheus text exposition format (version 0.0.4)."""
        lines = [f"# TYPE {REQUEST_COUNT} counter"]
        with self._lock:
            for (model, status), value in sorted(self._counts.items()):
                labels = _labels(("model_name", "status"), (model, status))
                lines.append(f"{REQUEST_COUNT}{labels} {value}")
            for name, names, series in (
                (REQUEST_LATENCY, self._LATENCY_LABELS, self._latency),
                (SIGNATURE_LATENCY, self._SIGNATURE_LABELS, self._by_signature),
            ):
                lines.append(f"# TYPE {name} histogram")
                for key, histogram in sorted(series.items()):
                    cumulative = 0
                    for bound, count in zip(BUCKETS, histogram.counts, strict=False):
                        cumulative += count
                        labels = _labels(names, key, f'le="{_number(bound)}"')
                        lines.append(f"{name}_bucket{labels} {cumulative}")
                    labels = _labels(names, key, 'le="+Inf"')
                    lines.append(f"{name}_bucket{labels} {histogram.count}")
                    lines.append(f"{name}_sum{_labels(names, key)} {_number(histogram.total)}")
                    lines.append(f"{name}_count{_labels(names, key)} {histogram.count}")
        return "\n".join(lines) + "\n"
