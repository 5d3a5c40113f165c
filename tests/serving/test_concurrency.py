"""Evidence: 8 clients in parallel (gRPC and REST), with and without batching, get zero errors
and the answers the same requests get one at a time.

Without batching the answers are identical. With batching, as in stock TensorFlow Serving, outputs
are split along dim 0 only: a [batch, T] output of a merged call is padded to the longest T of the
whole batch, so `tokens`, `source_tokens` and `alignment` may carry extra padding (empty strings,
zeros) at the end; translations and scores are identical, and so is everything after removing that
padding."""

from __future__ import annotations

import json
import threading
import urllib.request

import grpc
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from keras_attn.serving.config import BatchingOptions
from keras_attn.serving.server import ModelServer

from .conftest import MODEL_NAME

CLIENTS = 8
REQUESTS_PER_CLIENT = 12
TIMEOUT = 30


def texts_for(client: int, index: int) -> list[str]:
    """1 to 3 distinct sentences per request (so batches mix request sizes)."""
    return [f"c{client} r{index} s{k} " + "w " * ((client + k) % 4) for k in range(1 + index % 3)]


def grpc_answer(stub, texts, signature):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = MODEL_NAME
    request.model_spec.signature_name = signature
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(texts, dtype=tf.string))
    response = stub.Predict(request, timeout=TIMEOUT)
    return {key: tf.make_ndarray(value).tolist() for key, value in response.outputs.items()}


def rest_answer(port, texts, signature):
    body = json.dumps({"signature_name": signature, "inputs": {"text": texts}}).encode()
    url = f"http://127.0.0.1:{port}/v1/models/{MODEL_NAME}:predict"
    with urllib.request.urlopen(url, body, timeout=TIMEOUT) as answer:
        return json.loads(answer.read())["outputs"]


def without_padding(answer: dict) -> dict:
    """An answer with trailing padding removed from its token matrices and alignments."""
    tokens = [[t for t in row if t not in (b"", "")] for row in answer["tokens"]]
    result = {key: value for key, value in answer.items() if key not in ("tokens", "alignment")}
    result["tokens"] = tokens
    if "alignment" in answer:
        sources = [[t for t in row if t not in (b"", "")] for row in answer["source_tokens"]]
        result["source_tokens"] = sources
        result["alignment"] = [
            [row[: len(source)] for row in matrix[: len(target)]]
            for matrix, target, source in zip(answer["alignment"], tokens, sources, strict=True)
        ]
    return result


def client_requests(client: int):
    signature = "translate_with_alignment" if client % 2 else "serving_default"
    return [(texts_for(client, i), signature) for i in range(REQUESTS_PER_CLIENT)]


@pytest.mark.parametrize("batching", [False, True], ids=["no batching", "batching"])
def test_eight_parallel_clients_get_the_sequential_answers(model_base_path, batching):
    server = ModelServer(
        MODEL_NAME,
        model_base_path,
        port=0,
        rest_api_port=0,
        file_system_poll_wait_seconds=0,
        enable_batching=batching,
        batching=BatchingOptions(max_batch_size=16, batch_timeout_micros=2000, num_batch_threads=2),
    ).start()
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

        def answer(client, texts, signature):
            if client < CLIENTS // 2:
                return grpc_answer(stub, texts, signature)
            return rest_answer(server.rest_api_port, texts, signature)

        sequential = {
            client: [answer(client, t, s) for t, s in client_requests(client)]
            for client in range(CLIENTS)
        }
        parallel: dict[int, list] = {}
        errors: list[BaseException] = []
        start = threading.Barrier(CLIENTS)

        def run(client):
            start.wait()
            try:
                parallel[client] = [answer(client, t, s) for t, s in client_requests(client)]
            except BaseException as error:  # noqa: BLE001  (reported below)
                errors.append(error)

        threads = [threading.Thread(target=run, args=(c,)) for c in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(4 * TIMEOUT)
        channel.close()
        assert errors == []
        if not batching:
            assert parallel == sequential
        for client in range(CLIENTS):
            for got, expected in zip(parallel[client], sequential[client], strict=True):
                assert got["translation"] == expected["translation"]
                assert got["scores"] == expected["scores"]
                assert without_padding(got) == without_padding(expected)
        # The answers are the model's: the tokens of each text, reversed.
        first = sequential[0][0]["translation"]
        assert first == [" ".join(reversed(t.split())).encode() for t in texts_for(0, 0)]
    finally:
        server.stop(grace=1.0)
