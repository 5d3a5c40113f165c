"""The attention viewer of `keras-attn serve --ui`: its routes and headers, and the page driven in
headless Chromium against served models, its numbers checked against the gRPC answers."""

from __future__ import annotations

import html.parser
import json
import os
import shutil
import urllib.error
import urllib.request

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from tensorflow_serving.config import model_server_config_pb2

from keras_attn.cli import main
from keras_attn.export.contract import (
    GENERATOR_SIGNATURES,
    TRANSLATOR_SIGNATURES,
    classifier_signatures,
)
from keras_attn.serving.client import parse_response_outputs
from keras_attn.serving.server import ModelServer
from keras_attn.serving.ui import CONTENT_SECURITY_POLICY

TEXT_SPEC = tf.TensorSpec([None], tf.string, name="text")
# What the markup model answers: each would run script if the page parsed it as HTML.
IMG_MARKUP = "<img src=x onerror=\"document.title='pwned';window.pwned=1\">"
SCRIPT_MARKUP = "<script>document.title='pwned';window.pwned=2</script>"
BROWSER_SECONDS = 20
CLASS_NAMES = ("animal", "thing", "other")
SCENE_SIZE = 32  # the tiny captioner's images: 4x4 regions


class SoftTranslator(tf.Module):
    """The translator's signatures: whitespace tokens, words reversed, and alignments that are a
    softmax over the source positions of `-(t - s)^2 / 3 + len(source word) / 7` (no round
    numbers, so the page's copies are checked to the last digits)."""

    def __init__(self):
        super().__init__()
        self.tokenizer = tf_text.WhitespaceTokenizer()

    def _decode(self, text):
        words = self.tokenizer.tokenize(text)  # ragged (batch, None)
        lengths = words.row_lengths()
        source = words.to_tensor(default_value="")  # (batch, S)
        target = tf.reverse_sequence(source, lengths, seq_axis=1, batch_axis=0)  # (batch, S)
        translation = tf.strings.reduce_join(
            tf.RaggedTensor.from_tensor(target, lengths=lengths), axis=1, separator=" "
        )  # (batch,)
        return translation, target, source, lengths

    @tf.function(input_signature=[TEXT_SPEC])
    def translate(self, text):
        translation, target, _, lengths = self._decode(text)
        scores = -tf.cast(lengths, tf.float32) / 3.0
        return {"translation": translation, "tokens": target, "scores": scores}

    @tf.function(input_signature=[TEXT_SPEC])
    def translate_with_alignment(self, text):
        outputs = self.translate(text)
        _, _, source, lengths = self._decode(text)
        positions = tf.cast(tf.range(tf.shape(source)[1]), tf.float32)
        distance = (positions[:, None] - positions[None, :]) ** 2 / 3.0  # (T, S)
        word_length = tf.cast(tf.strings.length(source, "UTF8_CHAR"), tf.float32) / 7.0  # (b, S)
        logits = word_length[:, None, :] - distance[None]  # (batch, T, S)
        mask = tf.sequence_mask(lengths, tf.shape(source)[1])[:, None, :]  # (batch, 1, S)
        alignment = tf.nn.softmax(tf.where(mask, logits, -1e9), axis=-1)
        return {**outputs, "alignment": alignment, "source_tokens": source}


class MarkupTranslator(tf.Module):
    """A translator whose vocabulary holds HTML: every answer is made of markup tokens."""

    @tf.function(input_signature=[TEXT_SPEC])
    def translate_with_alignment(self, text):
        batch = tf.shape(text)[0]
        tokens = tf.constant([IMG_MARKUP, SCRIPT_MARKUP])
        return {
            "translation": tf.fill([batch], IMG_MARKUP + " " + SCRIPT_MARKUP),
            "tokens": tf.tile(tokens[None], [batch, 1]),
            "scores": tf.zeros([batch]),
            "alignment": tf.fill([batch, 2, 2], 0.5),
            "source_tokens": tf.tile(tokens[None, ::-1], [batch, 1]),
        }


class OptionsGenerator(tf.Module):
    """A generator whose continuation spells out the options it was called with."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="prompt")])
    def generate(self, prompt):
        return self._answer(prompt, "greedy")

    @tf.function(
        input_signature=[
            tf.TensorSpec([None], tf.string, name="prompt"),
            tf.TensorSpec([], tf.int32, name="max_length"),
            tf.TensorSpec([], tf.float32, name="temperature"),
            tf.TensorSpec([], tf.int32, name="top_k"),
            tf.TensorSpec([], tf.float32, name="top_p"),
        ]
    )
    def generate_with_options(self, prompt, max_length, temperature, top_k, top_p):
        options = tf.strings.format(
            "n={} t={} k={} p={}", (max_length, temperature, top_k, top_p), summarize=-1
        )
        return self._answer(prompt, options)

    def _answer(self, prompt, options):
        continuation = prompt + " " + options  # (batch,)
        tokens = tf.strings.split(continuation).to_tensor(default_value="")  # (batch, T)
        scores = -tf.cast(tf.strings.length(continuation), tf.float32) / 9.0
        return {"continuation": continuation, "tokens": tokens, "scores": scores}


class LengthClassifier(tf.Module):
    """A classifier of `RUN_LABELS`: a softmax over the text's word count, character count and
    count of the letter a, divided by 5."""

    @tf.function(input_signature=[TEXT_SPEC])
    def predict(self, text):
        features = [
            tf.cast(tf.strings.length(tf.strings.regex_replace(text, "[^ ]", "")), tf.float32) + 1,
            tf.cast(tf.strings.length(text), tf.float32),
            tf.cast(tf.strings.length(tf.strings.regex_replace(text, "[^a]", "")), tf.float32),
        ]
        scores = tf.nn.softmax(tf.stack(features, axis=1) / 5.0)  # (batch, 3)
        labels = tf.constant(CLASS_NAMES)
        return {
            "label": tf.gather(labels, tf.argmax(scores, axis=1)),
            "classes": tf.tile(labels[None], [tf.shape(text)[0], 1]),
            "scores": scores,
        }


def _save(module: tf.Module, path, names: dict[str, str]) -> str:
    signatures = {key: getattr(module, method) for key, method in names.items()}
    tf.saved_model.save(module, str(path / "1"), signatures=signatures)
    return str(path)


def _tiny_captioner(path) -> str:
    """An untrained Show, Attend and Tell captioner of 32-pixel scenes, exported."""
    import keras

    from keras_attn.export.captioner import Captioner, export_captioner
    from keras_attn.models.show_attend_tell.model import show_attend_tell
    from keras_attn.models.show_attend_tell.steps import ShowAttendTellSteps
    from keras_attn.text.tokenizer import WordPieceTokenizer
    from keras_attn.training.tasks.captioning import caption_vocabulary

    keras.utils.set_random_seed(3)
    tokenizer = WordPieceTokenizer(caption_vocabulary())
    model = show_attend_tell(
        tokenizer.vocab_size, SCENE_SIZE, attention="soft", embedding_dim=8, units=16,
        encoder_filters=(4, 8, 8), dropout=0.0,
    )  # fmt: skip
    captioner = Captioner(model, ShowAttendTellSteps(model), tokenizer, max_output_length=6)
    export_captioner(captioner, path, check=False, images=[_scene_png(0)])
    return str(path)


def _tiny_translator(root) -> str:
    """An untrained tiny `rnn-attention` run (`write_tiny_run`), exported as `keras-attn export`
    does."""
    from keras_attn.export.cli import export_run
    from tests.export.conftest import write_tiny_run

    run = write_tiny_run(root / "rnn-attention-run", "rnn-attention")
    export_run(run.path, root / "rnn-attention", check=False, max_output_length=6)
    return str(root / "rnn-attention")


def _tiny_answerer(root) -> str:
    """An untrained tiny `vqa-coattention` run (`write_tiny_run`: 32-pixel scenes), exported as
    `keras-attn export` does."""
    from keras_attn.export.cli import export_run
    from tests.export.conftest import write_tiny_run

    run = write_tiny_run(root / "answerer-run", "vqa-coattention")
    export_run(run.path, root / "answerer", check=False)
    return str(root / "answerer")


def _scene_png(seed: int) -> bytes:
    from keras_attn.vision import encode_png, generate_scene

    return encode_png(generate_scene(np.random.default_rng(seed), SCENE_SIZE).image)


@pytest.fixture(scope="module")
def model_config(tmp_path_factory) -> model_server_config_pb2.ModelServerConfig:
    root = tmp_path_factory.mktemp("ui_models")
    paths = {
        "translator": _save(
            SoftTranslator(),
            root / "translator",
            {
                "serving_default": "translate",
                "translate": "translate",
                "translate_with_alignment": "translate_with_alignment",
            },
        ),
        "markup": _save(
            MarkupTranslator(),
            root / "markup",
            {
                "serving_default": "translate_with_alignment",
                "translate_with_alignment": "translate_with_alignment",
            },
        ),
        "generator": _save(
            OptionsGenerator(),
            root / "generator",
            {
                "serving_default": "generate",
                "generate": "generate",
                "generate_with_options": "generate_with_options",
            },
        ),
        "classifier": _save(
            LengthClassifier(),
            root / "classifier",
            {"serving_default": "predict", "predict": "predict"},
        ),
        "captioner": _tiny_captioner(root / "captioner"),
        "answerer": _tiny_answerer(root),
        "rnn-attention": _tiny_translator(root),
    }
    config = model_server_config_pb2.ModelServerConfig()
    for name, path in paths.items():
        config.model_config_list.config.add(name=name, base_path=path, model_platform="tensorflow")
    return config


@pytest.fixture(scope="module")
def ui_server(model_config):
    server = ModelServer(model_config=model_config, port=0, rest_api_port=0, ui=True).start()
    yield server
    server.stop(grace=1.0)


@pytest.fixture(scope="module")
def page_url(ui_server) -> str:
    return f"http://127.0.0.1:{ui_server.rest_api_port}/"


@pytest.fixture(scope="module")
def grpc_stub(ui_server):
    import grpc

    with grpc.insecure_channel(f"127.0.0.1:{ui_server.port}") as channel:
        yield prediction_service_pb2_grpc.PredictionServiceStub(channel)


def _get(url: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


# --------------------------------------------------------------------------- routes and headers


def test_every_viewer_response_sends_a_restrictive_policy(page_url):
    expected_types = {
        "": "text/html; charset=utf-8",
        "ui/": "text/html; charset=utf-8",
        "ui/static/viewer.js": "text/javascript; charset=utf-8",
        "ui/static/viewer.css": "text/css; charset=utf-8",
        "ui/models.json": "application/json",
        "ui/scene.png?seed=3&size=32": "image/png",
    }
    for path, content_type in expected_types.items():
        status, headers, body = _get(page_url + path)
        assert (status, headers["Content-Type"]) == (200, content_type), path
        assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
        assert headers["X-Content-Type-Options"] == "nosniff"
    policy = dict((part.split(" ", 1) + [""])[:2] for part in CONTENT_SECURITY_POLICY.split("; "))
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == "'self'"  # no 'unsafe-inline', no 'unsafe-eval'
    assert policy["frame-ancestors"] == "'none'"
    listing = json.loads(_get(page_url + "ui/models.json")[2])
    assert listing["models"] == [
        "answerer", "captioner", "classifier", "generator", "markup", "rnn-attention",
        "translator",
    ]  # fmt: skip
    # How each export decodes: recorded by keras-attn export, absent from the fixture modules.
    greedy = {"decoder": "greedy", "jit_compile": False}
    assert listing["decoding"] == {
        "answerer": None, "captioner": greedy, "classifier": None, "generator": None,
        "markup": None, "rnn-attention": greedy, "translator": None,
    }  # fmt: skip


def test_the_page_has_no_inline_script_or_style(page_url):
    class Collect(html.parser.HTMLParser):
        scripts, inline = [], []

        def handle_starttag(self, tag, attrs):
            attributes = dict(attrs)
            if tag == "script":
                self.scripts.append(attributes.get("src"))
            self.inline += [name for name in attributes if name == "style" or name[:2] == "on"]

        def handle_data(self, data):
            if self.lasttag in ("script", "style") and data.strip():
                self.inline.append(self.lasttag)

    parser = Collect()
    parser.feed(_get(page_url)[2].decode("utf-8"))
    assert parser.scripts == ["/ui/static/viewer.js"]
    assert parser.inline == []
    script = _get(page_url + "ui/static/viewer.js")[2].decode("utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script  # model outputs reach the page through textContent only


@pytest.mark.parametrize(
    "model, signatures",
    [
        ("generator", GENERATOR_SIGNATURES),
        ("classifier", {k: v for k, v in classifier_signatures(3).items() if k != "classify"}),
        ("translator", TRANSLATOR_SIGNATURES),
    ],
)
def test_the_fixture_models_have_the_exported_signatures(page_url, model, signatures):
    """What the views rely on: the names and dtypes of each kind's exported signatures."""
    metadata = json.loads(_get(f"{page_url}v1/models/{model}/metadata")[2])
    served = metadata["metadata"]["signature_def"]["signature_def"]
    for name, (inputs, outputs) in signatures.items():
        for expected, tensors in (
            (inputs, served[name]["inputs"]),
            (outputs, served[name]["outputs"]),
        ):
            assert {key: tensors[key]["dtype"] for key in tensors} == {
                key: dtype for key, (dtype, _) in expected.items()
            }, (model, name)


def test_the_viewer_routes_only_read(page_url):
    for path in ("", "ui/static/viewer.js", "ui/models.json"):
        status, headers, _ = _get(page_url + path, method="POST")
        assert status == 404, path
        assert "Content-Security-Policy" not in headers
    for path in ("ui/static/index.html", "ui/static/../ui.py", "ui/static/", "ui/other"):
        assert _get(page_url + path)[0] == 404, path
    assert _get(page_url + "ui/scene.png?seed=-1")[0] == 400
    assert _get(page_url + "v1/models/translator")[0] == 200  # the REST API as before


def test_without_ui_the_page_is_not_served(server):
    base = f"http://127.0.0.1:{server.rest_api_port}/"
    for path in ("", "ui", "ui/", "ui/static/viewer.js", "ui/models.json", "ui/scene.png"):
        status, headers, _ = _get(base + path)
        assert status == 404, path
        assert "Content-Security-Policy" not in headers


def test_ui_needs_the_rest_port(tmp_path, capsys):
    assert main(["serve", "--model_name", "m", "--model_base_path", str(tmp_path), "--ui"]) == 2
    assert "--rest_api_port" in capsys.readouterr().err


@pytest.mark.parametrize("flags, ui", [([], False), (["--ui"], True), (["--ui=false"], False)])
def test_serve_passes_ui_to_the_server(tmp_path, monkeypatch, flags, ui):
    import keras_attn.serving.server as server_module

    created = {}

    class Refused(server_module.ModelServer):
        def start(self):
            created["ui"] = self._ui
            raise OSError("refused by the test")

    monkeypatch.setattr(server_module, "ModelServer", Refused)
    args = ["serve", "--model_name", "m", "--model_base_path", str(tmp_path)]
    assert main([*args, "--rest_api_port", "8501", *flags]) == 2  # never bound
    assert created == {"ui": ui}


# --------------------------------------------------------------------------- in the browser


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module (Debian's `chromium` and `chromium-driver`, which
    `make test` installs)."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium (the dev extra)")
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and chromedriver):
        reason = "needs the Debian packages chromium and chromium-driver (make test installs them)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,900"):
        options.add_argument(argument)
    options.add_argument("--disable-dev-shm-usage")
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(chromedriver))
    driver.set_script_timeout(BROWSER_SECONDS)
    yield driver
    driver.quit()


def _wait(driver, condition, message: str):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, BROWSER_SECONDS).until(condition, message)


def _open_model(driver, page_url: str, name: str, kind: str, reload: bool = True) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    if reload:
        driver.get(page_url)
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#model option"), "no model list")
    Select(driver.find_element(By.ID, "model")).select_by_value(name)
    _wait(
        driver,
        lambda d: (
            d.execute_script("return document.body.dataset.model") == name
            and not d.find_element(By.ID, kind).get_attribute("hidden")
        ),
        f"the {kind} view of {name} did not open",
    )


def _translate(driver, texts: list[str]) -> list:
    from selenium.webdriver.common.by import By

    field = driver.find_element(By.ID, "translator-input")
    field.clear()
    field.send_keys("\n".join(texts))
    driver.find_element(By.ID, "translator-run").click()
    return _wait(
        driver,
        lambda d: len(found := d.find_elements(By.CSS_SELECTOR, ".result")) == len(texts) and found,
        "no translation shown",
    )


def _grpc_outputs(stub, model: str, signature: str, texts: list[str]) -> dict:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(texts))
    return parse_response_outputs(stub.Predict(request, timeout=10))


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


@pytest.mark.parametrize("model", ["translator", "rnn-attention"])
def test_translator_view_shows_the_served_translation_and_alignment(
    browser, page_url, grpc_stub, model
):
    from selenium.webdriver.common.by import By

    texts = ["the girl sees a lion", "el parque"]
    _open_model(browser, page_url, model, "translator")
    kind = browser.find_element(By.ID, "kind").text
    decoding = " · greedy decoding" if model == "rnn-attention" else ""  # the fixture says none
    assert kind == "translator · version 1" + decoding
    results = _translate(browser, texts)
    served = _grpc_outputs(grpc_stub, model, "translate_with_alignment", texts)
    for i, result in enumerate(results):
        translation = result.find_element(By.CSS_SELECTOR, ".translation").text
        assert translation == _text(served["translation"][i]).strip()
        score = result.find_element(By.CSS_SELECTOR, ".score").text
        assert score == f"log-probability {served['scores'][i]:.4f}"
        targets = [_text(t) for t in served["tokens"][i] if _text(t)]
        sources = [_text(t) for t in served["source_tokens"][i] if _text(t)]
        assert len(targets) >= 2 and len(sources) >= 2
        heads = result.find_elements(By.CSS_SELECTOR, "thead th.source-token")
        assert [head.text for head in heads] == sources
        rows = result.find_elements(By.CSS_SELECTOR, "tbody tr")
        assert [row.find_element(By.CSS_SELECTOR, "th").text for row in rows] == targets
        weights = browser.execute_script(
            "return Array.from(arguments[0].querySelectorAll('tbody tr'), row =>"
            " Array.from(row.querySelectorAll('td'), cell => Number(cell.dataset.weight)))",
            result,
        )
        expected = np.asarray(served["alignment"][i])[: len(targets), : len(sources)]
        np.testing.assert_allclose(np.array(weights), expected, rtol=0, atol=1e-6)
        assert not np.allclose(expected, np.round(expected, 2))  # the check sees every digit
        cell = rows[-1].find_elements(By.CSS_SELECTOR, "td")[0]
        title = f"{targets[-1]} → {sources[0]}: {expected[-1, 0]:.4f}"
        assert cell.get_attribute("title") == title
    # A click on a target word marks its row and the source words it attends to most.
    result, t = results[0], 1
    result.find_elements(By.CSS_SELECTOR, ".tokens .token")[t].click()
    rows = result.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert ["selected" in row.get_attribute("class") for row in rows] == [
        row == t for row in range(len(rows))
    ]
    heads = result.find_elements(By.CSS_SELECTOR, "thead th.source-token")
    weights = np.asarray(served["alignment"][0])[t, : len(heads)]
    strong = ["strong" in head.get_attribute("class") for head in heads]
    assert strong == list(weights >= weights.max() / 2)
    if model == "translator":
        _screenshot(browser, "viewer_translator.png")


def test_markup_in_model_outputs_is_shown_as_text(browser, page_url):
    from selenium.webdriver.common.by import By

    _open_model(browser, page_url, "markup", "translator")
    title = browser.title
    (result,) = _translate(browser, ["anything"])
    assert result.find_element(By.CSS_SELECTOR, ".translation").text == (
        f"{IMG_MARKUP} {SCRIPT_MARKUP}"
    )
    heads = result.find_elements(By.CSS_SELECTOR, "thead th.source-token")
    assert [head.text for head in heads] == [SCRIPT_MARKUP, IMG_MARKUP]
    tokens = result.find_elements(By.CSS_SELECTOR, ".tokens .token")
    assert [token.text for token in tokens] == [IMG_MARKUP, SCRIPT_MARKUP]
    assert result.find_elements(By.TAG_NAME, "img") == []
    assert browser.find_elements(By.CSS_SELECTOR, "main script") == []
    browser.execute_script("return 0")  # lets any pending error handler run before the checks
    assert browser.execute_script("return window.pwned === undefined") is True
    _open_model(browser, page_url, "translator", "translator", reload=False)
    assert browser.find_elements(By.CSS_SELECTOR, "#translator-results .result") == []
    assert browser.title == title != "pwned"
    # The browser enforces the policy: a script element written into the page does not run.
    ran = browser.execute_script(
        "const s = document.createElement('script'); s.textContent = 'window.inline = 1';"
        "document.body.appendChild(s); return window.inline === 1"
    )
    assert ran is False


def test_generator_view_sends_the_sampling_options(browser, page_url):
    from selenium.webdriver.common.by import By

    _open_model(browser, page_url, "generator", "generator")
    for field, value in (
        ("prompt", "once upon"),
        ("temperature", "0.7"),
        ("top-k", "5"),
        ("top-p", "0.9"),
        ("max-length", "12"),
    ):
        element = browser.find_element(By.ID, f"generator-{field}")
        element.clear()
        element.send_keys(value)
    browser.find_element(By.ID, "generator-run").click()
    output = browser.find_element(By.ID, "generator-continuation")
    _wait(browser, lambda d: output.text, "no continuation shown")
    assert output.text == "once upon n=12 t=0.7 k=5 p=0.9"
    expected = -len(output.text) / 9.0
    score = browser.find_element(By.ID, "generator-score").text
    assert score == f"log-probability {np.float32(expected):.4f}"


def test_classifier_view_shows_the_label_probabilities(browser, page_url, grpc_stub):
    from selenium.webdriver.common.by import By

    texts = ["a cat and a dog", "the big village park is there"]
    _open_model(browser, page_url, "classifier", "classifier")
    field = browser.find_element(By.ID, "classifier-input")
    field.send_keys("\n".join(texts))
    browser.find_element(By.ID, "classifier-run").click()
    results = _wait(
        browser,
        lambda d: (
            len(found := d.find_elements(By.CSS_SELECTOR, "#classifier-results .result"))
            == len(texts)
            and found
        ),
        "no label shown",
    )
    served = _grpc_outputs(grpc_stub, "classifier", "predict", texts)
    for i, result in enumerate(results):
        assert result.find_element(By.CSS_SELECTOR, ".label").text == _text(served["label"][i])
        names = [cell.text for cell in result.find_elements(By.CSS_SELECTOR, ".class-name")]
        values = [
            float(cell.get_attribute("data-value"))
            for cell in result.find_elements(By.CSS_SELECTOR, ".probability")
        ]
        order = np.argsort(-np.asarray(served["scores"][i]), kind="stable")
        assert names == [_text(served["classes"][i][c]) for c in order]
        np.testing.assert_allclose(values, np.asarray(served["scores"][i])[order], atol=1e-6)


def _caption(driver, path: str) -> list:
    from selenium.webdriver.common.by import By

    driver.find_element(By.ID, "captioner-file").send_keys(path)
    return _wait(
        driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#captioner-words .token"), "no words"
    )


def assert_overlay_shows(cells, served_map):
    """The overlay's cells (`data-row`, `data-column`, `data-weight`) draw `served_map` (H', W'),
    one cell per region, and the map is not a constant."""
    assert len(cells) == served_map.size == 16
    shown = np.zeros(served_map.shape)
    for cell in cells:
        row, column = int(cell.get_attribute("data-row")), int(cell.get_attribute("data-column"))
        shown[row, column] = float(cell.get_attribute("data-weight"))
    np.testing.assert_allclose(shown, served_map, rtol=0, atol=1e-6)
    assert not np.allclose(served_map, served_map.flat[0])  # a map, not a constant


def test_captioner_view_overlays_the_served_attention_of_a_word(
    browser, page_url, grpc_stub, tmp_path
):
    from selenium.webdriver.common.by import By

    png = _scene_png(7)
    (tmp_path / "scene.png").write_bytes(png)
    _open_model(browser, page_url, "captioner", "captioner")
    words = _caption(browser, str(tmp_path / "scene.png"))
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "captioner"
    request.model_spec.signature_name = "caption"
    request.inputs["image"].CopyFrom(tf.make_tensor_proto([png]))
    served = parse_response_outputs(grpc_stub.Predict(request, timeout=10))
    tokens = [_text(t) for t in served["tokens"][0] if _text(t)]
    assert [word.text for word in words] == tokens
    assert browser.find_element(By.ID, "captioner-caption").text == _text(served["caption"][0])
    src = browser.find_element(By.ID, "captioner-image").get_attribute("src")
    assert src.startswith("data:image/png;base64,")
    t = len(tokens) - 1
    words[t].click()
    cells = browser.find_elements(By.CSS_SELECTOR, "#captioner-overlay div")
    served_map = np.asarray(served["attention"][0][t])  # (H', W')
    assert_overlay_shows(cells, served_map)
    # The cells lie over the image in reading order, a quarter of it on each side.
    first, last = cells[0].rect, cells[-1].rect
    image = browser.find_element(By.ID, "captioner-image").rect
    assert (first["x"], first["y"]) == (image["x"], image["y"])
    assert last["x"] + last["width"] == pytest.approx(image["x"] + image["width"], abs=1)
    assert first["width"] == pytest.approx(image["width"] / 4, abs=1)
    _screenshot(browser, "viewer_captioner.png")


def test_captioner_view_captions_a_generated_scene(browser, page_url, grpc_stub):
    import base64

    from selenium.webdriver.common.by import By

    _open_model(browser, page_url, "captioner", "captioner")
    browser.find_element(By.ID, "captioner-scene").click()
    status = browser.find_element(By.ID, "status")
    _wait(browser, lambda d: status.text == "ready", "the scene was not captioned")
    assert "error" not in status.get_attribute("class")
    src = browser.find_element(By.ID, "captioner-image").get_attribute("src")
    png = base64.b64decode(src.removeprefix("data:image/png;base64,"))
    assert tf.io.decode_png(png).shape == (64, 64, 3)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "captioner"
    request.inputs["image"].CopyFrom(tf.make_tensor_proto([png]))
    served = parse_response_outputs(grpc_stub.Predict(request, timeout=10))
    caption = browser.find_element(By.ID, "captioner-caption").text
    assert caption == _text(served["caption"][0])


def test_answerer_view_shows_the_served_answer_and_both_attentions(
    browser, page_url, grpc_stub, tmp_path
):
    from selenium.webdriver.common.by import By

    png = _scene_png(5)
    (tmp_path / "scene.png").write_bytes(png)
    question = "what color is the hat?"
    _open_model(browser, page_url, "answerer", "answerer")
    field = browser.find_element(By.ID, "answerer-question")
    field.clear()
    field.send_keys(question)
    browser.find_element(By.ID, "answerer-file").send_keys(str(tmp_path / "scene.png"))
    words = _wait(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#answerer-words .token"), "no words"
    )
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "answerer"
    request.model_spec.signature_name = "answer"
    request.inputs["image"].CopyFrom(tf.make_tensor_proto([png]))
    request.inputs["question"].CopyFrom(tf.make_tensor_proto([question]))
    served = parse_response_outputs(grpc_stub.Predict(request, timeout=10))
    assert browser.find_element(By.ID, "answerer-answer").text == _text(served["answer"][0])
    tokens = [_text(t) for t in served["tokens"][0] if _text(t)]
    assert [word.text for word in words] == tokens and len(tokens) == 6  # "?" included
    np.testing.assert_allclose(
        [float(word.get_attribute("data-weight")) for word in words],
        np.asarray(served["question_attention"][0])[: len(tokens)],
        rtol=0,
        atol=1e-6,
    )
    cells = browser.find_elements(By.CSS_SELECTOR, "#answerer-overlay div")
    served_map = np.asarray(served["attention"][0])  # (H', W')
    assert_overlay_shows(cells, served_map)
    # The five most probable answers, highest first.
    names = [
        c.text for c in browser.find_elements(By.CSS_SELECTOR, "#answerer-results .class-name")
    ]
    order = np.argsort(-np.asarray(served["scores"][0]), kind="stable")[:5]
    assert names == [_text(served["classes"][0][c]) for c in order]
    # Asking again about a drawn scene answers about that scene.
    browser.find_element(By.ID, "answerer-scene").click()
    status = browser.find_element(By.ID, "status")
    _wait(browser, lambda d: status.text == "ready", "the scene was not answered")
    assert "error" not in status.get_attribute("class")
    _screenshot(browser, "viewer_answerer.png")


def _screenshot(driver, name: str) -> None:
    """Saves a picture of the page as `name` in the folder KERAS_ATTN_SCREENSHOTS names, if set
    (how docs/figures/viewer_*.png are made)."""
    from selenium.webdriver.common.by import By

    folder = os.environ.get("KERAS_ATTN_SCREENSHOTS")
    if folder:
        size = driver.get_window_size()
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(size["width"], max(size["height"], height + 150))
        driver.find_element(By.TAG_NAME, "body").screenshot(os.path.join(folder, name))
        driver.set_window_size(size["width"], size["height"])
