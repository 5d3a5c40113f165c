"""Write a translator or GPT generator SavedModel into `MODEL_BASE_PATH/<version>/` (TF Serving)."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import overload

import keras
from tensorflow.core.protobuf import saved_model_pb2

from keras_attn.errors import ConfigError, PathExistsError, PathNotFoundError
from keras_attn.export.contract import check_generator_saved_model, check_translator_saved_model
from keras_attn.export.generator import Generator
from keras_attn.export.prefix_steps import PrefixSteps
from keras_attn.export.translator import Translator
from keras_attn.export.warmup import (
    WARMUP_TEXTS,
    bucket_warmup_feeds,
    filler_word,
    generator_warmup_feeds,
    translator_warmup_feeds,
    write_warmup_requests,
)
from keras_attn.formats import MAX_OUTPUT_LENGTH, export_description_path
from keras_attn.text.tokenizer import WordPieceTokenizer
from keras_attn.text.vocab import RESERVED_TOKENS, load_vocab


def existing_versions(model_base_path: str | os.PathLike) -> list[int]:
    """Integer version directories under `model_base_path`, sorted."""
    base = Path(model_base_path)
    if not base.is_dir():
        return []
    return sorted(int(p.name) for p in base.iterdir() if p.is_dir() and p.name.isdigit())


def disable_cudnn(model: keras.Model) -> None:
    """Make every recurrent layer trace its generic kernel, so no Cudnn op reaches the graph."""
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if hasattr(layer, "set_use_cudnn"):
            layer.set_use_cudnn(False)
        elif hasattr(layer, "use_cudnn"):
            layer.use_cudnn = False


@overload
def export_translator(
    translator: Translator,
    model_base_path: str | os.PathLike,
    version: int | None = None,
    check: bool = True,
    check_sentences: list[str] | None = None,
    warmup_texts: Sequence[str] | None = WARMUP_TEXTS,
) -> Path: ...


@overload
def export_translator(
    translator: keras.Model,
    source_vocabulary: Sequence[str] | str | os.PathLike,
    target_vocabulary: Sequence[str] | str | os.PathLike,
    model_base_path: str | os.PathLike,
    *,
    version: int | None = None,
    decoder: str = "greedy",
    beam_size: int = 4,
    length_penalty: float = 0.6,
    jit_compile: bool = False,
    max_source_length: int = 128,
    max_output_length: int = MAX_OUTPUT_LENGTH,
    steps=None,
    source_input: str | int | None = None,
    target_input: str | int | None = None,
    outputs: str | None = None,
    batch_buckets: Sequence[int] | None = None,
    length_buckets: Sequence[int] | None = None,
    check: bool = True,
    check_sentences: list[str] | None = None,
    warmup_texts: Sequence[str] | None = WARMUP_TEXTS,
) -> Path: ...


def export_translator(translator, *args, **kwargs) -> Path:
    """Export a translator as `model_base_path/<version>/` with the serving signatures.

    Two call forms:

    - `export_translator(translator, model_base_path, ...)`: a `Translator` module, exported
      as it is.
    - `export_translator(model, source_vocabulary, target_vocabulary, model_base_path, ...)`:
      any `keras.Model` mapping `(source_ids, target_ids)` to next-token scores
      `(batch, T_y, V)`, with its two WordPiece vocabularies; the `Translator` (tokenizers and
      search) is built here, decoding with `keras_attn.export.PrefixSteps` unless a cached
      step view is given as `steps`.

    Signatures: `serving_default` and `translate` (text → translation, tokens, scores) and,
    where the step view's state has an `"attention"` entry, `translate_with_alignment` (adds
    alignment, source_tokens). The SavedModel is written to a hidden temporary directory,
    checked (`check_translator_saved_model`) and only then renamed to its version number, so a
    server polling the base path never sees a partial or broken version, and a failed export
    leaves nothing behind. The version carries warm-up requests
    (`assets.extra/tf_serving_warmup_requests`, one `PredictRequest` per signature on
    `warmup_texts`) that stock TF Serving and `keras-attn serve` replay before serving it; a
    compiled translator (`jit_compile=True`) has one more request per (batch, length) bucket
    first, so every executable is compiled before the version is AVAILABLE.

    Args:
        translator: the `Translator` module, or the `keras.Model` (second form).
        source_vocabulary, target_vocabulary: (second form) the tokens in id order, or the path
            of a vocabulary file (one token per line, `keras_attn.text.vocab.save_vocab`); each
            starts with `[PAD]`, `[UNK]`, `[START]`, `[END]` (ids 0-3). The model's scores must
            cover the target vocabulary.
        model_base_path: the model's base directory (created if needed).
        version: integer version; default: one more than the newest existing version (or 1).
        decoder, beam_size, length_penalty, jit_compile, max_source_length, max_output_length,
            batch_buckets, length_buckets: (second form) as `Translator`'s.
        steps: (second form) a step view over `model` (faster than the generic one: e.g.
            `keras_attn.models.RNNTranslatorSteps(model)`); None: `PrefixSteps`.
        source_input, target_input, outputs: (second form, `steps=None`) as `PrefixSteps`'.
        check: run the contract check before publishing.
        check_sentences: sentences the check translates.
        warmup_texts: the texts of each warm-up request (None: write no warm-up file).

    Returns:
        The version directory.

    Raises:
        keras_attn.errors.PathExistsError: the version exists already (it is never
            overwritten); a FileExistsError.
        keras_attn.errors.PathNotFoundError: a vocabulary file that does not exist.
        keras_attn.errors.ConfigError: a non-positive version; a vocabulary without the
            reserved tokens first, or whose size differs from the model's; `source_input`,
            `target_input` or `outputs` with `steps`; a model that is not causal
            (`PrefixSteps`); the errors of `Translator`.
        keras_attn.export.contract.ContractError: the check failed (nothing is published).

    docs/own_model.md exports, serves and queries a functional-API translator this way.
    """
    if isinstance(translator, Translator):
        return _export_translator_module(translator, *args, **kwargs)
    if isinstance(translator, keras.Model):
        return _export_keras_translator(translator, *args, **kwargs)
    raise ConfigError(
        "Expected translator to be a keras_attn.export.translator.Translator or a keras.Model. "
        f"Received: translator of type {type(translator).__name__}",
        ["translator"],
    )


def _export_keras_translator(
    model: keras.Model,
    source_vocabulary,
    target_vocabulary,
    model_base_path: str | os.PathLike,
    *,
    version: int | None = None,
    decoder: str = "greedy",
    beam_size: int = 4,
    length_penalty: float = 0.6,
    jit_compile: bool = False,
    max_source_length: int = 128,
    max_output_length: int = MAX_OUTPUT_LENGTH,
    steps=None,
    source_input: str | int | None = None,
    target_input: str | int | None = None,
    outputs: str | None = None,
    batch_buckets: Sequence[int] | None = None,
    length_buckets: Sequence[int] | None = None,
    check: bool = True,
    check_sentences: list[str] | None = None,
    warmup_texts: Sequence[str] | None = WARMUP_TEXTS,
) -> Path:
    """The second form of `export_translator`: build the `Translator`, then export it."""
    source_tokenizer = vocabulary_tokenizer(source_vocabulary, "source_vocabulary")
    target_tokenizer = vocabulary_tokenizer(target_vocabulary, "target_vocabulary")
    if steps is None:
        steps = PrefixSteps(
            model,
            max_output_length,
            source_input=source_input,
            target_input=target_input,
            outputs=outputs,
            start_id=target_tokenizer.start_id,
            pad_id=target_tokenizer.pad_id,
            source_vocab_size=source_tokenizer.vocab_size,
        )
        if steps.vocab_size != target_tokenizer.vocab_size:
            raise ConfigError(
                f"the model scores {steps.vocab_size} tokens, but target_vocabulary has "
                f"{target_tokenizer.vocab_size}",
                ["target_vocabulary"],
            )
    else:
        given = {"source_input": source_input, "target_input": target_input, "outputs": outputs}
        named = [name for name, value in given.items() if value is not None]
        if named:
            raise ConfigError(
                f"{', '.join(named)} only apply to the generic step view (steps=None)",
                [*named, "steps"],
            )
    translator = Translator(
        model,
        steps,
        source_tokenizer,
        target_tokenizer,
        max_source_length=max_source_length,
        max_output_length=max_output_length,
        decoder=decoder,
        beam_size=beam_size,
        length_penalty=length_penalty,
        jit_compile=jit_compile,
        batch_buckets=batch_buckets,
        length_buckets=length_buckets,
    )
    return _export_translator_module(
        translator,
        model_base_path,
        version=version,
        check=check,
        check_sentences=check_sentences,
        warmup_texts=warmup_texts,
    )


def vocabulary_tokenizer(
    vocabulary: Sequence[str] | str | os.PathLike, argument: str
) -> WordPieceTokenizer:
    """A `WordPieceTokenizer` over `vocabulary` (tokens in id order, or a vocabulary file).

    Raises:
        keras_attn.errors.PathNotFoundError: the file does not exist.
        keras_attn.errors.ConfigError: the reserved tokens are not first, or a token repeats
            (the message names `argument`).
    """
    if isinstance(vocabulary, (str, os.PathLike)):
        if not Path(vocabulary).is_file():
            raise PathNotFoundError(
                f"{argument}='{vocabulary}' is not a vocabulary file", [argument]
            )
        vocabulary = load_vocab(vocabulary)
    tokens = [str(token) for token in vocabulary]
    if tokens[: len(RESERVED_TOKENS)] != RESERVED_TOKENS:
        raise ConfigError(
            f"Expected {argument} to start with the reserved tokens {RESERVED_TOKENS}. "
            f"Received: {tokens[: len(RESERVED_TOKENS)]}",
            [argument],
        )
    repeated = sorted(token for token, count in Counter(tokens).items() if count > 1)
    if repeated:
        raise ConfigError(f"{argument} repeats the tokens {repeated[:5]}", [argument])
    return WordPieceTokenizer(tokens)


def _export_translator_module(
    translator: Translator,
    model_base_path: str | os.PathLike,
    version: int | None = None,
    check: bool = True,
    check_sentences: list[str] | None = None,
    warmup_texts: Sequence[str] | None = WARMUP_TEXTS,
) -> Path:
    """The first form of `export_translator`."""
    endpoints = {"serving_default": translator.translate, "translate": translator.translate}
    if translator.with_alignment:
        endpoints["translate_with_alignment"] = translator.translate_with_alignment
    tracked = (translator.model, translator.source_tokenizer, translator.target_tokenizer)
    warmup = None
    if warmup_texts is not None:
        feeds = translator_warmup_feeds(_fitting(translator, warmup_texts))
        warmup = _bucket_feeds(translator, "translate", "text", translator.source_tokenizer, 0)
        warmup += [(name, feed) for name, feed in feeds.items() if name in endpoints]

    def contract(path):
        check_translator_saved_model(
            path, check_sentences, with_alignment=translator.with_alignment
        )

    return _publish(
        tracked,
        endpoints,
        model_base_path,
        version,
        contract if check else None,
        warmup,
        description=translator.decoding_description(),
    )


@overload
def export_generator(
    generator: Generator,
    model_base_path: str | os.PathLike,
    version: int | None = None,
    check: bool = True,
    check_prompts: list[str] | None = None,
    warmup_prompts: Sequence[str] | None = WARMUP_TEXTS,
) -> Path: ...


@overload
def export_generator(
    generator: keras.Model,
    vocabulary: Sequence[str] | str | os.PathLike,
    model_base_path: str | os.PathLike,
    *,
    version: int | None = None,
    max_prompt_length: int = 64,
    max_output_length: int = 64,
    jit_compile: bool = False,
    steps=None,
    outputs: str | None = None,
    batch_buckets: Sequence[int] | None = None,
    length_buckets: Sequence[int] | None = None,
    check: bool = True,
    check_prompts: list[str] | None = None,
    warmup_prompts: Sequence[str] | None = WARMUP_TEXTS,
) -> Path: ...


def export_generator(generator, *args, **kwargs) -> Path:
    """Export a language model as `model_base_path/<version>/`, published like a translator.

    Two call forms:

    - `export_generator(generator, model_base_path, ...)`: a `Generator` module (e.g. over a
      GPT model and its `keras_attn.models.GPTSteps`), exported as it is.
    - `export_generator(model, vocabulary, model_base_path, ...)`: any `keras.Model` mapping
      token ids `(batch, T)` (START then the text) to next-token scores `(batch, T, V)`, with
      its WordPiece vocabulary (a token list or a vocabulary file, `[PAD]`, `[UNK]`,
      `[START]`, `[END]` first); the `Generator` is built here, decoding with
      `keras_attn.export.PrefixSteps(..., language_model=True)` unless a cached step view is
      given as `steps` (whose cache must hold `max_prompt_length + 1 + max_output_length`
      slots).

    Signatures: `serving_default` and `generate` (prompt → continuation, tokens, scores) and
    `generate_with_options` (adds the scalar inputs max_length, temperature, top_k, top_p),
    checked by `check_generator_saved_model` before the version directory appears, with one
    warm-up request per signature on `warmup_prompts` (None: none), after one per (batch,
    length) bucket of a compiled generator.

    Args:
        generator: the `Generator` module, or the `keras.Model` (second form).
        vocabulary: (second form) the tokens in id order or a vocabulary file.
        model_base_path: the model's base directory (created if needed).
        version: integer version; default: one more than the newest existing version (or 1).
        max_prompt_length, max_output_length, jit_compile, batch_buckets, length_buckets:
            (second form) as `Generator`'s.
        steps: (second form) a step view over `model` with `prefill`, `step` and `max_length`;
            None: `PrefixSteps(model, ..., language_model=True)`.
        outputs: (second form, `steps=None`) as `PrefixSteps`'.
        check: run the contract check before publishing.
        check_prompts: prompts the check continues.
        warmup_prompts: the prompts of each warm-up request (None: write no warm-up file).

    Returns:
        The version directory.

    Raises:
        keras_attn.errors.PathExistsError: the version exists already.
        keras_attn.errors.PathNotFoundError: a vocabulary file that does not exist.
        keras_attn.errors.ConfigError: a non-positive version; a vocabulary without the
            reserved tokens first, or whose size differs from the model's; `outputs` with
            `steps`; a model that is not causal; the errors of `Generator`.
        keras_attn.export.contract.ContractError: the check failed (nothing is published).
    """
    if isinstance(generator, Generator):
        return _export_generator_module(generator, *args, **kwargs)
    if isinstance(generator, keras.Model):
        return _export_keras_generator(generator, *args, **kwargs)
    raise ConfigError(
        "Expected generator to be a keras_attn.export.generator.Generator or a keras.Model. "
        f"Received: generator of type {type(generator).__name__}",
        ["generator"],
    )


def _export_keras_generator(
    model: keras.Model,
    vocabulary,
    model_base_path: str | os.PathLike,
    *,
    version: int | None = None,
    max_prompt_length: int = 64,
    max_output_length: int = 64,
    jit_compile: bool = False,
    steps=None,
    outputs: str | None = None,
    batch_buckets: Sequence[int] | None = None,
    length_buckets: Sequence[int] | None = None,
    check: bool = True,
    check_prompts: list[str] | None = None,
    warmup_prompts: Sequence[str] | None = WARMUP_TEXTS,
) -> Path:
    """The second form of `export_generator`: build the `Generator`, then export it."""
    tokenizer = vocabulary_tokenizer(vocabulary, "vocabulary")
    if steps is None:
        steps = PrefixSteps(
            model,
            max_prompt_length + 1 + max_output_length,
            outputs=outputs,
            start_id=tokenizer.start_id,
            pad_id=tokenizer.pad_id,
            language_model=True,
        )
        if steps.vocab_size != tokenizer.vocab_size:
            raise ConfigError(
                f"the model scores {steps.vocab_size} tokens, but vocabulary has "
                f"{tokenizer.vocab_size}",
                ["vocabulary"],
            )
    elif outputs is not None:
        raise ConfigError(
            "outputs only applies to the generic step view (steps=None)", ["outputs", "steps"]
        )
    generator = Generator(
        model,
        steps,
        tokenizer,
        max_prompt_length=max_prompt_length,
        max_output_length=max_output_length,
        jit_compile=jit_compile,
        batch_buckets=batch_buckets,
        length_buckets=length_buckets,
    )
    return _export_generator_module(
        generator,
        model_base_path,
        version=version,
        check=check,
        check_prompts=check_prompts,
        warmup_prompts=warmup_prompts,
    )


def _export_generator_module(
    generator: Generator,
    model_base_path: str | os.PathLike,
    version: int | None = None,
    check: bool = True,
    check_prompts: list[str] | None = None,
    warmup_prompts: Sequence[str] | None = WARMUP_TEXTS,
) -> Path:
    """The first form of `export_generator`."""
    endpoints = {
        "serving_default": generator.generate,
        "generate": generator.generate,
        "generate_with_options": generator.generate_with_options,
    }
    warmup = None
    if warmup_prompts is not None:
        warmup = _bucket_feeds(generator, "generate", "prompt", generator.tokenizer, 1)
        warmup += list(generator_warmup_feeds(_fitting(generator, warmup_prompts)).items())

    def contract(path):
        check_generator_saved_model(path, check_prompts)

    tracked = (generator.model, generator.tokenizer)
    return _publish(
        tracked, endpoints, model_base_path, version, contract if check else None, warmup
    )


def _fitting(module, texts: Sequence[str]) -> Sequence[str]:
    """The first `texts`, as many as the largest batch bucket of a compiled `module` takes."""
    return texts[: module.batch_buckets[-1]] if module.jit_compile else texts


def _bucket_feeds(module, signature_name, input_name, tokenizer, extra_tokens) -> list:
    """The per-bucket warm-up requests of a compiled `module` (none for an uncompiled one)."""
    if not module.jit_compile:
        return []
    return bucket_warmup_feeds(
        signature_name,
        input_name,
        filler_word(tokenizer),
        module.batch_buckets,
        module.length_buckets,
        extra_tokens=extra_tokens,
    )


def set_signature_methods(path: str | os.PathLike, methods: dict[str, str]) -> None:
    """Set the method name of the signatures `methods` names in the SavedModel at `path`.

    `fingerprint.pb` (hashes of `saved_model.pb`) is removed with the change: a loader computes
    the fingerprint of a SavedModel that has none.
    """
    pb = Path(path) / "saved_model.pb"
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString(pb.read_bytes())
    for meta in proto.meta_graphs:
        for key, method in methods.items():
            if key in meta.signature_def:
                meta.signature_def[key].method_name = method
    pb.write_bytes(proto.SerializeToString())
    (Path(path) / "fingerprint.pb").unlink(missing_ok=True)


def _publish(
    tracked: Sequence,
    endpoints: dict,
    model_base_path: str | os.PathLike,
    version: int | None,
    check: Callable[[Path], object] | None,
    warmup_feeds: list | None,
    signature_methods: dict[str, str] | None = None,
    description: dict | None = None,
) -> Path:
    """Write an `ExportArchive` tracking `tracked` (in order; the Keras model first) with one
    endpoint per `endpoints` item, and the warm-up requests of `warmup_feeds` (unless None), to a
    hidden directory; name the methods of `signature_methods` (TensorFlow 2 writes every
    signature as predict); write `description` (how it decodes, unless None) beside the warm-up
    file; run `check(path)` (unless None); then rename it to its version."""
    archive = keras.export.ExportArchive()
    for resource in tracked:
        archive.track(resource)
    for name, function in endpoints.items():
        archive.add_endpoint(name, function)
    base = Path(model_base_path)
    if version is None:
        version = (existing_versions(base) or [0])[-1] + 1
    if version <= 0:
        raise ConfigError(f"version must be a positive integer, got {version}", ["version"])
    final = base / str(version)
    if final.exists():
        raise PathExistsError(f"{final} exists already; choose another version", ["version"])
    created = [path for path in (base, *base.parents) if not path.exists()]
    base.mkdir(parents=True, exist_ok=True)
    temporary = base / f".export-{version}-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    disable_cudnn(tracked[0])
    try:
        archive.write_out(str(temporary), verbose=False)
        if signature_methods:
            set_signature_methods(temporary, signature_methods)
        if warmup_feeds is not None:
            write_warmup_requests(temporary, warmup_feeds)
        if description is not None:
            path = Path(export_description_path(temporary))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(description, indent=1) + "\n", encoding="utf-8")
        if check is not None:
            check(temporary)
        os.replace(temporary, final)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
        for path in created:  # a failed first export leaves no empty directories behind
            if path.exists() and not any(path.iterdir()):
                path.rmdir()
    return final
