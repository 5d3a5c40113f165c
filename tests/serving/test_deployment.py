"""The stock TensorFlow Serving recipe in `serving/`: its config files parse into the real message
types, and docker-compose.yml runs the matching image with those files mounted."""

from __future__ import annotations

import json
import pathlib

import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from keras_attn.serving.config import BatchingOptions, BatchingParameters

SERVING = pathlib.Path(__file__).resolve().parents[2] / "serving"


def _scalar(text: str):
    if text.startswith("'") and text.endswith("'"):
        return text[1:-1].replace("''", "'")
    if text.startswith(('"', "[", "{")):
        return json.loads(text)
    return text


def _block(lines: list[tuple[int, str]], index: int, indent: int):
    if lines[index][1].startswith("- "):
        items = []
        while index < len(lines) and lines[index][0] == indent and lines[index][1].startswith("- "):
            items.append(_scalar(lines[index][1][2:].strip()))
            index += 1
        return items, index
    mapping = {}
    while index < len(lines) and lines[index][0] == indent:
        key, _, rest = lines[index][1].partition(":")
        index += 1
        if rest.strip():
            mapping[key] = _scalar(rest.strip())
        else:
            assert lines[index][0] > indent, f"empty value for {key}"
            mapping[key], index = _block(lines, index, lines[index][0])
    return mapping, index


def parse_compose(text: str) -> dict:
    """Parses the block-style YAML subset compose files use (PyYAML is not a dependency)."""
    lines = [
        (len(raw) - len(raw.lstrip(" ")), raw.strip())
        for raw in text.splitlines()
        if raw.strip() and not raw.strip().startswith("#")
    ]
    value, index = _block(lines, 0, lines[0][0])
    assert index == len(lines), f"unparsed line: {lines[index][1]}"
    return value


def mounts(service: dict) -> dict[str, str]:
    """Container path -> host path of the service's volumes (all must be read-only)."""
    result = {}
    for volume in service["volumes"]:
        assert volume.endswith(":ro"), volume
        source, target = volume[: -len(":ro")].rsplit(":", 1)
        result[target] = source
    return result


@pytest.fixture(scope="module")
def service() -> dict:
    compose = parse_compose((SERVING / "docker-compose.yml").read_text())
    return compose["services"]["translator"]


def test_models_config_is_a_model_server_config(service):
    config = text_format.Parse(
        (SERVING / "models.config").read_text(), model_server_config_pb2.ModelServerConfig()
    )
    (model,) = config.model_config_list.config
    assert model.name == "translator"
    assert model.model_platform == "tensorflow"
    assert model.model_version_policy.latest.num_versions == 1
    assert model.base_path in mounts(service)


def test_batching_parameters_are_batching_parameters():
    parameters = text_format.Parse(
        (SERVING / "batching_parameters.txt").read_text(), BatchingParameters()
    )
    names = ("max_batch_size", "batch_timeout_micros", "num_batch_threads", "max_enqueued_batches")
    for name in names:
        assert parameters.HasField(name), name
        assert getattr(parameters, name).value > 0, name
    assert parameters.max_batch_size.value == 32
    assert BatchingOptions.from_proto(parameters).max_batch_size == 32


def test_compose_runs_stock_serving_with_batching_and_the_config(service):
    image, tag = service["image"].split(":")
    assert image == "tensorflow/serving"
    assert tag.split(".")[:2] == tf.__version__.split(".")[:2]
    assert service["entrypoint"] == ["tensorflow_model_server"]
    assert {"8500:8500", "8501:8501"} <= set(service["ports"])

    flags = dict(flag.lstrip("-").split("=", 1) for flag in service["command"])
    assert flags["port"] == "8500"
    assert flags["rest_api_port"] == "8501"
    assert flags["enable_batching"] == "true"
    volumes = mounts(service)
    for flag, file in (
        ("model_config_file", "models.config"),
        ("batching_parameters_file", "batching_parameters.txt"),
    ):
        assert volumes[flags[flag]] == f"./{file}"
        assert (SERVING / file).is_file()
    # The model directory defaults to models/translator at the repository root, where the
    # README's `keras-attn export ... --model_base_path models/translator` writes it.
    assert volumes["/models/translator"] == "${MODEL_DIR:-../models/translator}"

    check = service["healthcheck"]["test"]
    assert check[0] == "CMD"
    assert "/dev/tcp/127.0.0.1/8501" in check[-1]
    assert "GET /v1/models/translator " in check[-1]
    assert "AVAILABLE" in check[-1]


def test_readme_walks_from_export_to_query():
    readme = (SERVING / "README.md").read_text()
    for step in (
        "keras-attn export runs/ende --model_base_path models/translator",
        "docker compose -f serving/docker-compose.yml up",
        "keras-attn translate --server localhost:8500",
        "keras-attn serve",
    ):
        assert step in readme, step
