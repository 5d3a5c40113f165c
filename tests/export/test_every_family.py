"""Every exportable model family, from `MODEL_FAMILIES`: its step view decodes as teacher forcing
scores, `keras-attn export` writes a contract-checked SavedModel of its run, and one model server
answers each served model as the in-process serving module does.

Each family gets a tiny untrained run (`tests.export.conftest.write_tiny_run`: the run directory
`keras-attn train` writes, random seeded weights). A recurrent family's step view is compared at
one and at two layers; its export and its served answers at two (`num_layers=2`: the bridges from
each encoder layer to its decoder layer, every layer's state in the exported decoding loop).
"""

import grpc
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import (
    classification_pb2,
    predict_pb2,
    prediction_service_pb2_grpc,
)
from tensorflow_serving.config import model_server_config_pb2

from keras_attn.errors import ConfigError
from keras_attn.export.answerer import answerer_from_run
from keras_attn.export.captioner import Captioner, sample_images
from keras_attn.export.classifier import classifier_from_run
from keras_attn.export.cli import export_run
from keras_attn.export.contract import (
    CLASSIFY_METHOD,
    GENERATOR_SIGNATURES,
    TAGGER_SIGNATURES,
    answerer_signatures,
    captioner_signatures,
    classifier_signatures,
    serialized_text_examples,
    translator_signatures,
)
from keras_attn.export.generator import Generator
from keras_attn.export.translator import Translator
from keras_attn.formats import warmup_path
from keras_attn.models.families import MODEL_FAMILIES
from keras_attn.models.family import DECODED_KINDS, EXPORTED_KINDS
from keras_attn.serving.server import ModelServer
from keras_attn.vision import ANSWERS, encode_png
from tests.export.conftest import RUN_IMAGE_SIZE, RUN_LABELS
from tests.export.served_scores import teacher_forced_log_probs

MAX_OUTPUT = 6  # generated tokens, every decoded kind
STEPS = 5  # teacher-forced positions compared with the step view
GRID = (RUN_IMAGE_SIZE // 8,) * 2  # the image regions: the encoder halves the side 3 times

# The method of the in-process module each kind's `serving_default` signature wraps; a signature
# of another name wraps the module's method of that name.
DEFAULT_METHODS = {
    "translator": "translate",
    "generator": "generate",
    "captioner": "caption",
    "classifier": "predict",
    "tagger": "tag",
    "answerer": "answer",
}
TEXTS = [
    "There is a girl behind the village.",
    "¿Cuántas amigas habrá junto a esta puerta?",
    "",
    "the lion the park and the milk that was there in my room",
]
PROMPTS = ["the girl", "a lion that is", ""]
QUESTIONS = ["what colour is the square?", "how many shapes are there?", ""]  # one per image
IMAGES = [
    *(
        encode_png(rng.integers(0, 256, (RUN_IMAGE_SIZE, RUN_IMAGE_SIZE, 3), dtype=np.uint8))
        for rng in map(np.random.default_rng, range(2))
    ),
    sample_images(RUN_IMAGE_SIZE)[2],  # a larger JPEG
]
# The request value of each signature input, by name (generate_with_options: greedy, 3 tokens).
REQUEST_INPUTS = {
    "text": TEXTS,
    "prompt": PROMPTS,
    "image": IMAGES,
    "question": QUESTIONS,
    "inputs": serialized_text_examples(TEXTS),
    "max_length": 3,
    "temperature": 0.0,
    "top_k": 0,
    "top_p": 1.0,
}


def family_cases(shallow):
    """`(name, options)` of every exportable family, each recurrent one two layers deep; with
    `shallow`, each recurrent one at its default depth too."""
    cases = []
    for name, family in MODEL_FAMILIES.items():
        if not family.exportable:
            continue
        if not {"units", "num_layers"} <= set(family.option_names):
            cases.append(pytest.param(name, {}, id=name))
            continue
        if shallow:
            cases.append(pytest.param(name, {}, id=name))
        cases.append(pytest.param(name, {"num_layers": 2}, id=f"{name}-deep"))
    return cases


CASES = family_cases(shallow=False)  # exported and served
DECODED_CASES = [
    case
    for case in family_cases(shallow=True)
    if MODEL_FAMILIES[case.values[0]].kind in DECODED_KINDS
]


def served_name(name, options):
    return name.replace("-", "_") + "".join(f"_{k}{v}" for k, v in sorted(options.items()))


def test_every_exported_kind_has_a_case_here():
    assert set(DEFAULT_METHODS) == set(EXPORTED_KINDS), "a kind without a case in this file"
    for name, family in MODEL_FAMILIES.items():
        if family.exportable:
            assert family.kind in DEFAULT_METHODS, f"{name}: kind {family.kind!r} is not covered"
    undecoded = [case for case in CASES if MODEL_FAMILIES[case.values[0]].kind not in DECODED_KINDS]
    assert len(DECODED_CASES) > 0 and len(undecoded) > 0


@pytest.mark.parametrize("name", [n for n, f in MODEL_FAMILIES.items() if not f.exportable])
def test_a_family_without_an_export_is_refused(tiny_run, tmp_path, name):
    with pytest.raises(ConfigError, match=f"a {name} run is not exported"):
        export_run(tiny_run(name).path, tmp_path / "models")
    assert not (tmp_path / "models").exists()


# --- the step view equals teacher forcing ----------------------------------------------------


def ids(rng, low, high, shape, start_id=None):
    """Random token ids in [low, high); a START column first when `start_id` is given."""
    values = rng.integers(low, high, size=shape).astype("int32")
    if start_id is not None:
        values[:, 0] = start_id
    return values


def stepped_and_teacher_forced(family, run, model):
    """`(logits of the step view, the model's teacher-forced logits)` for the same prefixes,
    each `(batch, STEPS, V)`; a batch of two whose second row is padded."""
    rng = np.random.default_rng(0)
    if family.kind == "translator":
        source_tokenizer, target = run.tokenizers()
        source = ids(rng, 4, source_tokenizer.vocab_size, (2, 6))
        source[1, 3:] = source_tokenizer.pad_id
        target_ids = ids(rng, 4, target.vocab_size, (2, STEPS), target.start_id)
        full = model({"source_ids": source, "target_ids": target_ids})
        steps = family.decoding_steps(model, STEPS)
        state, tokens = steps.encode(source), target_ids.T
    elif family.kind == "captioner":
        tokenizer = run.tokenizer()
        images = rng.integers(0, 256, (2, RUN_IMAGE_SIZE, RUN_IMAGE_SIZE, 3)).astype("uint8")
        target_ids = ids(rng, 4, tokenizer.vocab_size, (2, STEPS), tokenizer.start_id)
        full = model({"images": images, "target_ids": target_ids})["logits"]
        steps = family.decoding_steps(model, STEPS)
        state, tokens = steps.encode(images), target_ids.T
    elif family.kind == "generator":
        tokenizer = run.tokenizer()
        prompts = ids(rng, 4, tokenizer.vocab_size, (2, 4))
        prompts[1, 2:] = tokenizer.pad_id
        continuation = ids(rng, 4, tokenizer.vocab_size, (2, STEPS - 1))
        steps = family.decoding_steps(model, 4 + STEPS)
        state = steps.prefill(prompts)
        # The first step gives the prompt's next-token logits (the START fed is not attended to).
        tokens = [np.full(2, tokenizer.start_id, "int32"), *continuation.T]
        full = []
        for prompt, following in zip(prompts, continuation, strict=True):
            real = prompt[prompt != tokenizer.pad_id]
            sequence = np.concatenate([real, following])[None]
            full.append(np.asarray(model(sequence))[0, len(real) - 1 :])
    else:
        pytest.fail(f"{family.name}: no step-view comparison for kind {family.kind!r}")
    stepped = []
    for token_ids in tokens:
        logits, state = steps.step(tf.constant(token_ids), state)
        stepped.append(np.asarray(logits))
    return np.stack(stepped, axis=1), np.asarray(full, np.float32)


@pytest.mark.parametrize("name, options", DECODED_CASES)
def test_step_view_equals_teacher_forcing(tiny_run, name, options):
    family = MODEL_FAMILIES[name]
    run = tiny_run(name, **options)
    model = run.load_model()
    stepped, full = stepped_and_teacher_forced(family, run, model)
    assert stepped.shape == full.shape == (2, STEPS, full.shape[-1]) and stepped.dtype == np.float32
    # float32 round-off of two evaluation orders of the same sums
    np.testing.assert_allclose(stepped, full, atol=1e-5, rtol=1e-5)


# --- export, contract check, serving ---------------------------------------------------------


@pytest.fixture(scope="module")
def exports(tiny_run, tmp_path_factory):
    """`exports(name, options)`: `(run, version directory)` of the case's tiny run exported as
    `keras-attn export RUN` exports it (greedy, `MAX_OUTPUT` tokens), once per case."""
    base = tmp_path_factory.mktemp("every_family")
    done = {}

    def export(name, options):
        key = served_name(name, options)
        if key not in done:
            run = tiny_run(name, **options)
            decoded = MODEL_FAMILIES[name].kind in DECODED_KINDS
            length = {"max_output_length": MAX_OUTPUT} if decoded else {}
            done[key] = (run, export_run(run.path, base / key, **length))  # + contract check
        return done[key]

    export.base = base
    return export


def signature_defs(version):
    """`{signature: SignatureDef}` of a SavedModel, read from its `saved_model.pb`."""
    proto = saved_model_pb2.SavedModel.FromString((version / "saved_model.pb").read_bytes())
    defs = proto.meta_graphs[0].signature_def
    return {key: value for key, value in defs.items() if not key.startswith("__")}


def contract_signatures(family, module):
    """The signatures (name → (inputs, outputs)) the contract gives the module's kind."""
    if family.kind == "translator":
        return translator_signatures(module.with_alignment)
    if family.kind == "generator":
        return GENERATOR_SIGNATURES
    if family.kind == "captioner":
        return captioner_signatures(GRID)
    if family.kind == "classifier":
        return classifier_signatures(len(RUN_LABELS))
    if family.kind == "tagger":
        return TAGGER_SIGNATURES
    if family.kind == "answerer":
        return answerer_signatures(len(ANSWERS), GRID)
    pytest.fail(f"{family.name}: no contract signatures for kind {family.kind!r}")


def in_process_module(family, run):
    """The serving module `keras-attn export` builds for the run, built here."""
    if family.kind in ("classifier", "tagger"):
        return classifier_from_run(run.path)
    if family.kind == "answerer":
        return answerer_from_run(run.path)
    model = run.load_model()
    if family.kind == "translator":
        source, target = run.tokenizers()
        steps = family.decoding_steps(model, MAX_OUTPUT)
        max_length = run.read_config_fields()["max_length"]
        return Translator(
            model, steps, source, target, max_source_length=max_length,
            max_output_length=MAX_OUTPUT,
        )  # fmt: skip
    if family.kind == "generator":
        max_length = run.read_config_fields()["max_length"]
        steps = family.decoding_steps(model, max_length + 1 + MAX_OUTPUT)
        return Generator(
            model, steps, run.tokenizer(), max_prompt_length=max_length,
            max_output_length=MAX_OUTPUT,
        )  # fmt: skip
    if family.kind == "captioner":
        steps = family.decoding_steps(model, MAX_OUTPUT)
        return Captioner(model, steps, run.tokenizer(), max_output_length=MAX_OUTPUT)
    pytest.fail(f"{family.name}: no in-process module for kind {family.kind!r}")


@pytest.fixture(scope="module")
def modules():
    """`modules(family, run)`: `in_process_module(family, run)`, built once per run."""
    built = {}

    def module(family, run):
        if run.path not in built:
            built[run.path] = in_process_module(family, run)
        return built[run.path]

    return module


@pytest.mark.parametrize("name, options", CASES)
def test_export_passes_the_contract_check(exports, modules, name, options):
    family = MODEL_FAMILIES[name]
    run, version = exports(name, options)  # export_run raises when the check fails
    assert version == exports.base / served_name(name, options) / "1"
    expected = contract_signatures(family, modules(family, run))
    defs = signature_defs(version)
    assert set(defs) == set(expected)
    for signature, (inputs, outputs) in expected.items():
        assert set(defs[signature].inputs) == set(inputs), signature
        assert set(defs[signature].outputs) == set(outputs), signature
    assert (version / "assets.extra").is_dir() and tf.io.gfile.exists(warmup_path(version))


@pytest.fixture(scope="module")
def server(exports):
    """A gRPC stub of one `ModelServer` serving every case's export (warm-up off: the
    warm-up records are tested in test_warmup.py)."""
    config = model_server_config_pb2.ModelServerConfig()
    for case in CASES:
        name, options = case.values
        exports(name, options)
        config.model_config_list.config.add(
            name=served_name(name, options),
            base_path=str(exports.base / served_name(name, options)),
            model_platform="tensorflow",
        )
    with (
        ModelServer(
            model_config=config,
            port=0,
            enable_signature_method_name_check=True,
            enable_model_warmup=False,
            file_system_poll_wait_seconds=0,
        ) as model_server,
        grpc.insecure_channel(f"127.0.0.1:{model_server.port}") as channel,
    ):
        yield prediction_service_pb2_grpc.PredictionServiceStub(channel)


def request_value(name, dtype):
    if name not in REQUEST_INPUTS:
        pytest.fail(f"no request value for the signature input {name!r}: add one to REQUEST_INPUTS")
    return tf.constant(REQUEST_INPUTS[name], tf.as_dtype(dtype))


def predicted(stub, model_name, signature, feeds):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature
    for key, value in feeds.items():
        request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
    response = stub.Predict(request, timeout=60)
    return {key: tf.make_ndarray(value) for key, value in response.outputs.items()}


def classified(stub, model_name, signature, serialized):
    """The Classify answer as the classify signature's outputs, `classes` and `scores`."""
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature
    for example in serialized:
        request.input.example_list.examples.add().ParseFromString(example)
    response = stub.Classify(request, timeout=60)
    rows = response.result.classifications
    return {
        "classes": np.array([[c.label.encode() for c in row.classes] for row in rows], object),
        "scores": np.array([[c.score for c in row.classes] for row in rows], np.float32),
    }


def assert_same(served, wanted, where):
    assert set(served) == set(wanted), where
    for key, want in wanted.items():
        want, got = np.asarray(want), np.asarray(served[key])
        assert got.shape == want.shape, (where, key)
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"{where} {key}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{where} {key}")


def assert_scores_are_teacher_forced(module, outputs):
    """A translator's served alignment covers only real source tokens, and its scores are the
    teacher-forced log-probabilities of the served tokens."""
    tokens, source_tokens = outputs["tokens"], outputs["source_tokens"]
    alignment = outputs["alignment"]
    assert alignment.shape == (len(TEXTS), tokens.shape[1], source_tokens.shape[1])
    assert (tokens != b"").any() and tokens.shape[1] <= MAX_OUTPUT
    for row in range(len(TEXTS)):  # padded source positions get no attention
        assert np.all(alignment[row][:, source_tokens[row] == b""] == 0.0)
    limit = min(MAX_OUTPUT, 2 * source_tokens.shape[1] + 10)  # the export's length limit
    tokenizers = (module.source_tokenizer, module.target_tokenizer)
    expected = teacher_forced_log_probs(module.model, tokenizers, source_tokens, tokens, limit)
    for row, (_, log_prob) in enumerate(expected):
        np.testing.assert_allclose(outputs["scores"][row], log_prob, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name, options", CASES)
def test_served_answers_equal_the_in_process_module(exports, modules, server, name, options):
    family = MODEL_FAMILIES[name]
    run, version = exports(name, options)
    module = modules(family, run)
    model_name = served_name(name, options)
    for signature, signature_def in signature_defs(version).items():
        feeds = {key: request_value(key, info.dtype) for key, info in signature_def.inputs.items()}
        method = DEFAULT_METHODS[family.kind] if signature == "serving_default" else signature
        wanted = {k: v.numpy() for k, v in getattr(module, method)(**feeds).items()}
        if signature_def.method_name == CLASSIFY_METHOD:
            served = classified(server, model_name, signature, REQUEST_INPUTS["inputs"])
        else:
            served = predicted(server, model_name, signature, feeds)
        assert_same(served, wanted, f"{model_name} {signature}")
        if signature == "translate_with_alignment":
            assert_scores_are_teacher_forced(module, served)
