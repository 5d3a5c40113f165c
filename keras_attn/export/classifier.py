"""Served text classifiers and taggers: text in, labels out, tokenization in the graph.

A `Classifier` answers TF Serving's Classification API (`classify`: serialized tf.Examples in,
`classes` and `scores` out) and Predict (`predict`, `serving_default`: text in, the top label,
classes and scores out); a `Tagger` answers Predict with one tag per word. Both wrap any Keras
model from token ids to class scores: the built-in classifier and tagger families'
(`classifier_from_run` reads a `keras-attn train` run directory) and a user's own
(`export_classifier(model, ..., vocabulary=..., label_names=...)`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from keras_attn.api_export import keras_attn_export
from keras_attn.errors import ConfigError, PathNotFoundError
from keras_attn.export.contract import (
    CLASSIFIER_METHODS,
    check_classifier_saved_model,
    check_tagger_saved_model,
)
from keras_attn.export.saved_model import _publish
from keras_attn.export.saved_model import set_signature_methods as set_signature_methods
from keras_attn.export.warmup import WARMUP_TEXTS, classifier_warmup_feeds, tagger_warmup_feeds
from keras_attn.formats import LABELS, MODEL_FILE, RunDirectory, load_finite_model
from keras_attn.text.tokenizer import WordPieceTokenizer
from keras_attn.text.vocab import RESERVED_TOKENS, load_vocab

TEXT_SPEC = tf.TensorSpec([None], tf.string, name="text")
EXAMPLES_SPEC = tf.TensorSpec([None], tf.string, name="inputs")
SCORE_KINDS = ("logits", "probabilities")
# How a model input other than the token ids is filled: segment ids with zeros (one segment),
# a padding mask with `token_ids != 0`.
SEGMENT_INPUT, MASK_INPUT = "segment", "mask"


def _tokenizer(vocabulary) -> WordPieceTokenizer:
    """A tokenizer of `vocabulary` (tokens, a vocabulary file or a tokenizer), whose first four
    tokens must be the reserved ones."""
    if isinstance(vocabulary, WordPieceTokenizer):
        return vocabulary
    if isinstance(vocabulary, str | os.PathLike):
        if not Path(vocabulary).is_file():
            raise PathNotFoundError(
                f"vocabulary={os.fspath(vocabulary)!r} is not a vocabulary file", ["vocabulary"]
            )
        vocabulary = load_vocab(vocabulary)
    tokens = [str(token) for token in vocabulary]
    if tokens[: len(RESERVED_TOKENS)] != RESERVED_TOKENS:
        raise ConfigError(
            f"Expected the vocabulary to start with the reserved tokens {RESERVED_TOKENS} "
            f"(ids 0-3). Received: vocabulary[:4]={tokens[: len(RESERVED_TOKENS)]}",
            ["vocabulary"],
        )
    if len(set(tokens)) != len(tokens):
        raise ConfigError("Expected distinct tokens in the vocabulary", ["vocabulary"])
    return WordPieceTokenizer(tokens)


def _names(names, argument: str) -> list[str]:
    """`names` as a list of distinct non-empty strings."""
    if isinstance(names, str) or not names:
        raise ConfigError(f"Expected a list of names. Received: {argument}={names!r}", [argument])
    names = [str(name) for name in names]
    if "" in names or len(set(names)) != len(names):
        raise ConfigError(
            f"Expected distinct non-empty names. Received: {argument}={names!r}", [argument]
        )
    return names


class _TokenIdModel(tf.Module):
    """Text → token ids in the model's input format → the model's class probabilities.

    The shared part of `Classifier` and `Tagger`: tokenization, the first and last tokens, the
    length cap, the model's inputs (token ids, and segment ids or a padding mask beside them)
    and turning its outputs into float32 probabilities.
    """

    # The rank of the model's output: (batch, C) for a classifier, (batch, T, C) for a tagger.
    output_rank = 2
    names_argument = "label_names"

    def __init__(
        self,
        model: keras.Model,
        vocabulary,
        names: Sequence[str],
        first_token: str | None,
        last_token: str | None,
        max_length: int | None,
        scores: str | None,
        token_input: str | None,
        name: str,
    ):
        super().__init__(name=name)
        self.model = model
        self.tokenizer = _tokenizer(vocabulary)
        self.names = _names(names, self.names_argument)
        vocab = self.tokenizer.vocab
        self.first_id, self.last_id = (
            self._token_id(vocab, token, argument)
            for token, argument in ((first_token, "first_token"), (last_token, "last_token"))
        )
        added = (first_token is not None) + (last_token is not None)
        if max_length is not None and (isinstance(max_length, bool) or max_length <= added):
            raise ConfigError(
                f"Expected max_length > {added} (the first and last tokens). "
                f"Received: max_length={max_length!r}",
                ["max_length"],
            )
        self.max_length = max_length
        # Pieces of the text kept: the rest of `max_length` after the first and last tokens.
        self._kept = None if max_length is None else max_length - added
        self._structure, self._inputs = _model_inputs(model, token_input)
        if scores is not None and scores not in SCORE_KINDS:
            raise ConfigError(
                f"Expected scores in {SCORE_KINDS} or None. Received: scores={scores!r}",
                ["scores"],
            )
        self.scores = self._probe(scores)

    @staticmethod
    def _token_id(vocab: list[str], token: str | None, argument: str) -> int | None:
        if token is None:
            return None
        if token not in vocab:
            raise ConfigError(
                f"{argument}={token!r} is not a token of the vocabulary", [argument, "vocabulary"]
            )
        return vocab.index(token)

    def format_ids(self, pieces: tf.RaggedTensor) -> tf.Tensor:
        """WordPiece ids `(batch, None)` → int64 `(batch, T)` as the model reads them: the first
        `max_length` ids of `first_token`, the pieces and `last_token`, right-padded with 0
        (at least one position)."""
        if self._kept is not None:
            pieces = pieces[:, : self._kept]
        batch = pieces.nrows()

        def column(token_id: int) -> tf.RaggedTensor:  # (batch, 1)
            return tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.constant(token_id, tf.int64)))

        parts = [pieces]
        if self.first_id is not None:
            parts.insert(0, column(self.first_id))
        if self.last_id is not None:
            parts.append(column(self.last_id))
        ids = tf.concat(parts, axis=1) if len(parts) > 1 else pieces
        ids = ids.to_tensor(default_value=0)  # (batch, T)
        width = tf.shape(ids)[1]
        return tf.pad(ids, [[0, 0], [0, tf.maximum(1 - width, 0)]])

    def probabilities(self, ids: tf.Tensor) -> tf.Tensor:
        """float32 class probabilities of the model on int `(batch, T)` ids: `(batch, C)` for a
        classifier, `(batch, T, C)` for a tagger."""
        outputs = self.model(self._features(ids), training=False)
        outputs = tf.cast(_single_output(outputs), tf.float32)
        if self.scores == "logits":
            return tf.nn.softmax(outputs, axis=-1)
        return outputs

    def _features(self, ids: tf.Tensor):
        """The model's inputs for `ids`, in the structure it was built with."""
        values = {}
        for key, (role, dtype) in self._inputs.items():
            if role == SEGMENT_INPUT:
                values[key] = tf.zeros_like(ids, dtype)
            elif role == MASK_INPUT:
                values[key] = tf.cast(tf.not_equal(ids, 0), dtype)
            else:
                values[key] = tf.cast(ids, dtype)
        if self._structure == "dict":
            return values
        if self._structure == "list":
            return list(values.values())
        return next(iter(values.values()))

    def _probe(self, scores: str | None) -> str:
        """Run the model on a few formatted rows: check its output's rank and width, and tell
        logits from probabilities (rows that sum to 1) where `scores` does not say."""
        rng = np.random.default_rng(0)
        low = min(len(RESERVED_TOKENS), self.tokenizer.vocab_size - 1)
        sample = rng.integers(low, self.tokenizer.vocab_size, 3 + 5 + 8)
        sample[0] = self.tokenizer.vocab_size - 1  # the largest id is among them
        pieces = tf.RaggedTensor.from_row_lengths(sample, [3, 5, 8])
        ids = self.format_ids(tf.cast(pieces, tf.int64))
        try:
            outputs = self.model(self._features(ids), training=False)
        except tf.errors.InvalidArgumentError as error:  # e.g. an id past the embedding
            raise ConfigError(
                f"The model fails on the ids of the vocabulary ({self.tokenizer.vocab_size} "
                f"tokens): {error.message.strip().splitlines()[0]}",
                ["model", "vocabulary"],
            ) from None
        try:
            values = np.asarray(tf.cast(_single_output(outputs), tf.float32))
        except ValueError as error:
            raise ConfigError(str(error), ["model"]) from None
        expected = "(batch, num_classes)" if self.output_rank == 2 else "(batch, T, num_tags)"
        if values.ndim != self.output_rank or values.shape[-1] != len(self.names):
            raise ConfigError(
                f"Expected the model to map token ids to scores {expected} with one score per "
                f"name of {self.names_argument} ({len(self.names)}). Received outputs of shape "
                f"{values.shape}",
                ["model", self.names_argument],
            )
        if self.output_rank == 3:
            values = values[np.asarray(ids) != 0]  # the real positions, (N, C)
        in_range = np.all(values >= 0) and np.all(values <= 1)
        distributions = bool(in_range and np.allclose(values.sum(-1), 1, atol=1e-3))
        if scores == "probabilities" and not distributions:
            raise ConfigError(
                "scores='probabilities', but the model's outputs are not probabilities (they "
                "do not sum to 1 over the classes); pass scores='logits'",
                ["scores"],
            )
        if scores is None:
            return "probabilities" if distributions else "logits"
        return scores


def _single_output(outputs):
    """The one tensor of a model's outputs (a dict's `"logits"` entry, or its only entry)."""
    if isinstance(outputs, dict):
        if "logits" in outputs:
            return outputs["logits"]
        outputs = list(outputs.values())
    if isinstance(outputs, list | tuple):
        if len(outputs) != 1:
            raise ValueError(
                f"Expected the model to return one tensor of scores. Received {len(outputs)} "
                "outputs"
            )
        return outputs[0]
    return outputs


def _model_inputs(model: keras.Model, token_input: str | None) -> tuple[str, dict]:
    """`(structure, {key: (role, dtype)})` of the model's inputs: structure `"tensor"`, `"list"`
    or `"dict"`; role `"tokens"`, `SEGMENT_INPUT` or `MASK_INPUT`.

    A model with no known inputs (a subclassed model) takes one int32 tensor.
    """
    try:
        structure = model.input
    except (AttributeError, ValueError):  # a Sequential not called yet has only `inputs`
        try:
            structure = model.inputs[0] if len(model.inputs or ()) == 1 else None
        except (AttributeError, ValueError):
            structure = None
    if structure is None:
        if token_input is not None:
            raise ConfigError(
                f"token_input={token_input!r}, but the model has no named inputs", ["token_input"]
            )
        return "tensor", {"token_ids": ("tokens", "int32")}
    if isinstance(structure, dict):
        kind, entries = "dict", dict(structure)
    elif isinstance(structure, list | tuple):
        kind, entries = "list", {tensor.name: tensor for tensor in structure}
    else:
        kind, entries = "tensor", {structure.name: structure}
    if token_input is None:
        token_input = next(iter(entries)) if len(entries) == 1 else "token_ids"
    if token_input not in entries:
        raise ConfigError(
            f"Expected token_input to name one of the model's inputs {sorted(entries)}. "
            f"Received: token_input={token_input!r}",
            ["token_input"],
        )
    inputs = {}
    for key, tensor in entries.items():
        dtype = keras.backend.standardize_dtype(tensor.dtype)
        if key == token_input:
            if "int" not in dtype:
                raise ConfigError(
                    f"Expected integer token ids (int32 or int64) as the model's input "
                    f"{key!r}. Received: dtype={dtype!r}",
                    ["model"],
                )
            inputs[key] = ("tokens", dtype)
        elif "segment" in key:
            inputs[key] = (SEGMENT_INPUT, dtype)
        elif "mask" in key:
            inputs[key] = (MASK_INPUT, dtype)
        else:
            raise ConfigError(
                f"The model's input {key!r} is neither its token ids ({token_input!r}), segment "
                "ids nor a padding mask: an exported model reads text only",
                ["model", "token_input"],
            )
    return kind, inputs


@keras_attn_export("keras_attn.export.classifier.Classifier")
class Classifier(_TokenIdModel):
    """Text in, class labels and probabilities out: the path the exported signatures wrap.

    text `[batch]` → `WordPieceTokenizer` → ids, `first_token` before and `last_token` after
    them, the first `max_length` kept → the model (its other inputs filled: segment ids with
    zeros, a padding mask with `ids != 0`) → softmax over the logits (or the model's own
    probabilities) → labels.

    Signatures (methods, each a `tf.function` with a fixed input signature):
    - `predict(text)` (exported as `predict` and `serving_default`): `text` `[batch]` string →
      `label` `[batch]` string (the most probable class), `classes` `[batch, num_classes]`
      string (the label names, in `label_names` order) and `scores` `[batch, num_classes]`
      float32 (their probabilities).
    - `classify(inputs)` (exported as `classify`, method `tensorflow/serving/classify`): TF
      Serving's Classification API. `inputs` `[batch]` serialized tf.Examples, each with the
      text in the bytes feature `text_feature` (an example without it fails the request) →
      `classes` and `scores` as above.

    Args:
        model: a `keras.Model` from token ids `(batch, T)` (int32 or int64; padding is id 0) to
            class scores `(batch, num_classes)`, logits or probabilities (a final softmax).
            Named inputs are fine: `token_input` (default: the only input, else the one named
            `"token_ids"`) gets the ids, an input named like `*segment*` zeros and one named
            like `*mask*` `ids != 0`. Tracked, so the SavedModel holds its variables.
        vocabulary: the model's WordPiece vocabulary: the tokens in id order, a vocabulary
            file (one token a line) or a `WordPieceTokenizer`; `[PAD]`, `[UNK]`, `[START]`,
            `[END]` first (ids 0-3).
        label_names: the class names, in the order of the model's scores.
        first_token, last_token: tokens put before and after the text's pieces (e.g.
            `"[START]"` and `"[END]"`, or BERT's `"[CLS]"` and `"[SEP]"`); None for none.
        max_length: the most ids the model reads, the first and last tokens included (the
            pieces past it are cut); None for no limit.
        scores: `"logits"` (softmax applied) or `"probabilities"` (taken as they are); None
            tells them apart by running the model on a few rows (probabilities sum to 1).
        text_feature: the tf.Example feature holding the text in `classify`.
        token_input: the name of the model's token-id input, for a model with several.
        name: module name.

    Raises:
        keras_attn.errors.ConfigError: a vocabulary without the reserved tokens first,
            `first_token`/`last_token` not in it, a `max_length` with no room for the text,
            model outputs that are not `(batch, len(label_names))`, an input that is neither
            token ids, segment ids nor a mask, or `scores="probabilities"` for a model whose
            outputs do not sum to 1.

    Example:

    >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "good", "bad", "film"]
    >>> ids = keras.Input((None,), dtype="int32")
    >>> pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(7, 4)(ids))
    >>> model = keras.Model(ids, keras.layers.Dense(2)(pooled))
    >>> classifier = Classifier(model, vocab, ["negative", "positive"])
    >>> classifier.scores
    'logits'
    >>> outputs = classifier.predict(tf.constant(["good film", "bad"]))
    >>> outputs["scores"].shape, outputs["classes"][0].numpy().tolist()
    (TensorShape([2, 2]), [b'negative', b'positive'])
    """

    def __init__(
        self,
        model: keras.Model,
        vocabulary,
        label_names: Sequence[str],
        first_token: str | None = None,
        last_token: str | None = None,
        max_length: int | None = None,
        scores: str | None = None,
        text_feature: str = "text",
        token_input: str | None = None,
        name: str = "classifier",
    ):
        super().__init__(
            model, vocabulary, label_names, first_token, last_token, max_length, scores,
            token_input, name,
        )  # fmt: skip
        if not isinstance(text_feature, str) or not text_feature:
            raise ConfigError(
                f"Expected a feature name. Received: text_feature={text_feature!r}",
                ["text_feature"],
            )
        self.text_feature = text_feature
        self.label_names = self.names
        self.predict = tf.function(self._predict, input_signature=[TEXT_SPEC], autograph=False)
        self.classify = tf.function(
            self._classify, input_signature=[EXAMPLES_SPEC], autograph=False
        )

    def _outputs(self, text):
        scores = self.probabilities(self.format_ids(self.tokenizer.tokenize(text)))
        scores = tf.ensure_shape(scores, [None, len(self.label_names)])  # (batch, C)
        names = tf.constant(self.label_names, tf.string)
        classes = tf.tile(names[None], [tf.shape(scores)[0], 1])  # (batch, C)
        classes = tf.ensure_shape(classes, [None, len(self.label_names)])
        return {
            "label": tf.gather(names, tf.argmax(scores, axis=-1)),
            "classes": classes,
            "scores": scores,
        }

    def _predict(self, text):
        return self._outputs(text)

    def _classify(self, inputs):
        spec = {self.text_feature: tf.io.FixedLenFeature([], tf.string)}
        text = tf.io.parse_example(inputs, spec)[self.text_feature]  # (batch,)
        outputs = self._outputs(text)
        return {"classes": outputs["classes"], "scores": outputs["scores"]}


@keras_attn_export("keras_attn.export.classifier.Tagger")
class Tagger(_TokenIdModel):
    """Text in, one tag per word out (token classification, e.g. named entities).

    text `[batch]` → words (split on whitespace, as a `tokens TAB tags` training file is) →
    each word's WordPiece ids, concatenated, `first_token` before and `last_token` after, the
    first `max_length` ids kept → the model's tag probabilities `(batch, T, num_tags)` → each
    word tagged where its first piece is (Devlin et al., 2018, section 5.3).

    `tag(text)` (exported as `tag` and `serving_default`, a `tf.function` with a fixed input
    signature) returns `tokens` `[batch, L]` string (the words as sent, padded with ""),
    `tags` `[batch, L]` string (the most probable tag of each word) and `scores` `[batch, L]`
    float32 (its probability); a word past `max_length`, a word that is no token (all its
    characters dropped by normalization) and the padding get tag "" and score 0.

    There is no `classify` signature: TF Serving's Classification API returns one list of
    classes per tf.Example, and has no form for one tag per word. Query the tagger with Predict.

    Args:
        model: a `keras.Model` from token ids `(batch, T)` to tag scores `(batch, T, num_tags)`,
            logits or probabilities; its inputs as for `Classifier`.
        vocabulary, first_token, last_token, max_length, scores, token_input: as for
            `Classifier`.
        tag_names: the tag names, in the order of the model's scores.
        name: module name.

    Raises:
        keras_attn.errors.ConfigError: as `Classifier`, for outputs that are not
            `(batch, T, len(tag_names))`.

    References:
        Devlin et al., 2018, "BERT: Pre-training of Deep Bidirectional Transformers for
        Language Understanding", arXiv:1810.04805.
    """

    output_rank = 3
    names_argument = "tag_names"

    def __init__(
        self,
        model: keras.Model,
        vocabulary,
        tag_names: Sequence[str],
        first_token: str | None = None,
        last_token: str | None = None,
        max_length: int | None = None,
        scores: str | None = None,
        token_input: str | None = None,
        name: str = "tagger",
    ):
        super().__init__(
            model, vocabulary, tag_names, first_token, last_token, max_length, scores,
            token_input, name,
        )  # fmt: skip
        self.tag_names = self.names
        self.tag = tf.function(self._tag, input_signature=[TEXT_SPEC], autograph=False)

    def _tag(self, text):
        words = tf.strings.split(text)  # (batch, W) ragged
        pieces = self.tokenizer.tokenize(words.flat_values)  # (N, P) ragged, N words
        counts = pieces.row_lengths()  # (N,)
        # (batch, W, P) -> (batch, pieces of the sentence)
        sentences = tf.RaggedTensor.from_row_splits(pieces, words.row_splits).merge_dims(1, 2)
        probabilities = self.probabilities(self.format_ids(sentences))  # (batch, T, C)
        # Where each word's first piece is among its sentence's pieces.
        rows = words.value_rowids()  # (N,)
        start = tf.cumsum(counts, exclusive=True) - tf.gather(sentences.row_starts(), rows)
        kept = counts > 0
        if self._kept is not None:
            kept &= start < self._kept
        column = start + (0 if self.first_id is None else 1)
        column = tf.minimum(column, tf.cast(tf.shape(probabilities)[1] - 1, column.dtype))
        word_scores = tf.gather_nd(probabilities, tf.stack([rows, column], axis=1))  # (N, C)
        names = tf.constant(self.tag_names, tf.string)
        tags = tf.where(kept, tf.gather(names, tf.argmax(word_scores, axis=-1)), "")
        scores = tf.where(kept, tf.reduce_max(word_scores, axis=-1), 0.0)
        return {
            "tokens": words.to_tensor(default_value=""),
            "tags": words.with_flat_values(tags).to_tensor(default_value=""),
            "scores": words.with_flat_values(scores).to_tensor(default_value=0.0),
        }


def _require(what: str, **arguments) -> None:
    """A `ConfigError` naming the `arguments` that are None (needed to build a `what`)."""
    missing = [name for name, value in arguments.items() if value is None]
    if missing:
        raise ConfigError(
            f"{' and '.join(missing)} must be given to export a keras.Model as a {what}", missing
        )


def _refuse(what: str, **arguments) -> None:
    """A `ConfigError` naming the `arguments` given (they build a `what` from a model)."""
    given = sorted(name for name, value in arguments.items() if value is not None)
    if given:
        raise ConfigError(
            f"{', '.join(given)} build a {what} from a keras.Model; the {what} passed has its own",
            given,
        )


@keras_attn_export("keras_attn.export.classifier.export_classifier")
def export_classifier(
    classifier: Classifier | keras.Model,
    model_base_path: str | os.PathLike,
    version: int | None = None,
    *,
    vocabulary=None,
    label_names: Sequence[str] | None = None,
    check: bool = True,
    check_texts: Sequence[str] | None = None,
    warmup_texts: Sequence[str] | None = WARMUP_TEXTS,
    **options,
) -> Path:
    """Export a classifier as `model_base_path/<version>/` with the serving signatures.

    Signatures `serving_default` and `predict` (`text` → `label`, `classes`, `scores`) and
    `classify` (TF Serving's Classification API, method `tensorflow/serving/classify`:
    serialized tf.Examples `inputs` → `classes` `[-1, num_classes]`, `scores`
    `[-1, num_classes]`). The version is written to a hidden temporary directory with warm-up
    requests (a `classify_log` of tf.Examples and a `PredictRequest` per predict signature, on
    `warmup_texts`), checked by `check_classifier_saved_model` (a separate process importing only
    tensorflow and tensorflow_text) and only then renamed to its version number, as
    `keras_attn.export.saved_model.export_translator` publishes a translator.

    Args:
        classifier: a `Classifier`, or a `keras.Model` from token ids to class scores, which
            `vocabulary`, `label_names` and `options` make into one.
        model_base_path: the model's base directory (created if needed).
        version: integer version; default: one more than the newest existing version (or 1).
        vocabulary: for a `keras.Model`: its vocabulary (tokens or a vocabulary file).
        label_names: for a `keras.Model`: the class names, in the order of its scores.
        check: run the contract check before publishing.
        check_texts: the texts the check classifies (default: `warmup_texts`, or a short text
            and an empty one).
        warmup_texts: the texts of the warm-up requests (None: write no warm-up file).
        **options: for a `keras.Model`: the other arguments of `Classifier` (`first_token`,
            `last_token`, `max_length`, `scores`, `text_feature`, `token_input`).

    Returns:
        The version directory.

    Raises:
        keras_attn.errors.PathExistsError: the version exists already.
        keras_attn.errors.ConfigError: a non-positive version; a `keras.Model` without
            `vocabulary` or `label_names`, or a `Classifier` with them; what `Classifier`
            raises.
        keras_attn.export.contract.ContractError: the check failed (nothing is published).
    """
    if not isinstance(classifier, Classifier):
        _require("classifier", vocabulary=vocabulary, label_names=label_names)
        classifier = Classifier(classifier, vocabulary, label_names, **options)
    else:
        _refuse("Classifier", vocabulary=vocabulary, label_names=label_names, **options)
    texts = list(check_texts or warmup_texts or ["a short text", ""])
    endpoints = {
        "serving_default": classifier.predict,
        "predict": classifier.predict,
        "classify": classifier.classify,
    }
    labels, feature = classifier.label_names, classifier.text_feature
    warmup = None if warmup_texts is None else classifier_warmup_feeds(warmup_texts, feature)

    def contract(path):
        return check_classifier_saved_model(path, labels, texts, feature)

    return _publish(
        (classifier.model, classifier.tokenizer),
        endpoints,
        model_base_path,
        version,
        contract if check else None,
        warmup,
        signature_methods=CLASSIFIER_METHODS,
    )


@keras_attn_export("keras_attn.export.classifier.export_tagger")
def export_tagger(
    tagger: Tagger | keras.Model,
    model_base_path: str | os.PathLike,
    version: int | None = None,
    *,
    vocabulary=None,
    tag_names: Sequence[str] | None = None,
    check: bool = True,
    check_texts: Sequence[str] | None = None,
    warmup_texts: Sequence[str] | None = WARMUP_TEXTS,
    **options,
) -> Path:
    """Export a tagger as `model_base_path/<version>/` with the serving signatures.

    Signatures `serving_default` and `tag`: `text` DT_STRING `[-1]` → `tokens`, `tags`
    DT_STRING `[-1, -1]` and `scores` DT_FLOAT `[-1, -1]` (no `classify`: the Classification API
    has no per-word form). Published as `export_classifier` publishes a classifier, with one
    warm-up request per signature, checked by `check_tagger_saved_model`.

    Args:
        tagger: a `Tagger`, or a `keras.Model` from token ids to tag scores, which
            `vocabulary`, `tag_names` and `options` make into one.
        model_base_path, version, check, check_texts, warmup_texts: as for
            `export_classifier`.
        vocabulary: for a `keras.Model`: its vocabulary (tokens or a vocabulary file).
        tag_names: for a `keras.Model`: the tag names, in the order of its scores.
        **options: for a `keras.Model`: the other arguments of `Tagger`.

    Returns:
        The version directory.

    Raises:
        As `export_classifier`.
    """
    if not isinstance(tagger, Tagger):
        _require("tagger", vocabulary=vocabulary, tag_names=tag_names)
        tagger = Tagger(tagger, vocabulary, tag_names, **options)
    else:
        _refuse("Tagger", vocabulary=vocabulary, tag_names=tag_names, **options)
    texts = list(check_texts or warmup_texts or ["a short text", ""])
    endpoints = {"serving_default": tagger.tag, "tag": tagger.tag}
    tags = tagger.tag_names
    warmup = None if warmup_texts is None else tagger_warmup_feeds(warmup_texts)

    def contract(path):
        return check_tagger_saved_model(path, tags, texts)

    tracked = (tagger.model, tagger.tokenizer)
    return _publish(
        tracked, endpoints, model_base_path, version, contract if check else None, warmup
    )


# The serving module of a run, by its family's kind.
RUN_MODULES: dict[str, type[_TokenIdModel]] = {"classifier": Classifier, "tagger": Tagger}


@keras_attn_export("keras_attn.export.classifier.classifier_from_run")
def classifier_from_run(run_path: str | os.PathLike) -> Classifier | Tagger:
    """The `Classifier` (a sentence-classification run) or `Tagger` (a tagging run) of a
    `keras-attn train` run directory, formatting text as its training did.

    The family's backbone gives the format (`keras_attn.training.tasks.classification`):
    `[CLS] pieces [SEP]` with segment ids 0 for a BERT backbone, `[START] pieces [END]` for any
    other, at most the run's `max_length` ids; the labels are the run's `labels.txt`.

    Args:
        run_path: a finished run of a classifier family (`bert-classifier`,
            `gpt-classifier`, `bart-classifier`, `text-cnn`) or a tagger family
            (`bert-tagger`, `bart-tagger`).

    Returns:
        A `Classifier` or a `Tagger`.

    Raises:
        keras_attn.errors.PathNotFoundError: not a run directory, or one without `model.keras`
            or `labels.txt`.
        keras_attn.errors.ConfigError: a run of another task, or a model with non-finite
            weights.
    """
    from keras_attn.text.masked_lm import CLS_TOKEN, SEP_TOKEN

    run = RunDirectory(run_path)
    for name in ("config.json", MODEL_FILE, LABELS):
        if not run.file(name).exists():
            raise PathNotFoundError(
                f"{run_path} is not a finished classifier run (no {name})", ["run_path"]
            )
    config = run.read_config_fields()
    family = run.family()
    module = RUN_MODULES.get(family.kind)
    if module is None:
        raise ConfigError(
            f"a {config['model']} run is neither a classifier nor a tagger", ["run_path"]
        )
    model = load_finite_model(run)
    names = run.file(LABELS).read_text(encoding="utf-8").splitlines()
    # The formats of `keras_attn.training.tasks.classification`: [CLS] … [SEP] for BERT.
    start, end = RESERVED_TOKENS[2:4]
    first, last = (CLS_TOKEN, SEP_TOKEN) if family.backbone == "bert" else (start, end)
    return module(
        model,
        run.tokenizer(),
        names,
        first_token=first,
        last_token=last,
        max_length=config["max_length"],
        scores="logits",
    )


@keras_attn_export("keras_attn.export.classifier.export_classifier_run")
def export_classifier_run(
    run_path: str | os.PathLike,
    model_base_path: str | os.PathLike,
    version: int | None = None,
    check: bool = True,
) -> Path:
    """Export a classifier or tagger run directory (`classifier_from_run`) with
    `export_classifier` or `export_tagger`; returns the version directory.

    Raises:
        What `classifier_from_run` and the export raise.
    """
    module = classifier_from_run(run_path)
    if isinstance(module, Tagger):
        return export_tagger(module, model_base_path, version, check=check)
    return export_classifier(module, model_base_path, version, check=check)
