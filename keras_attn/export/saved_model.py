"""Write a translator or GPT generator SavedModel into `MODEL_BASE_PATH/<version>/` (TF Serving)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import keras

from keras_attn.errors import ConfigError, PathExistsError
from keras_attn.export.contract import check_generator_saved_model, check_translator_saved_model
from keras_attn.export.generator import Generator
from keras_attn.export.translator import Translator
from keras_attn.export.warmup import (
    WARMUP_TEXTS,
    bucket_warmup_feeds,
    filler_word,
    generator_warmup_feeds,
    translator_warmup_feeds,
    write_warmup_requests,
)


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


def export_translator(
    translator: Translator,
    model_base_path: str | os.PathLike,
    version: int | None = None,
    check: bool = True,
    check_sentences: list[str] | None = None,
    warmup_texts: Sequence[str] | None = WARMUP_TEXTS,
) -> Path:
    """Export `translator` as `model_base_path/<version>/` with the serving signatures.

    Signatures: `serving_default` and `translate` (text → translation, tokens, scores) and
    `translate_with_alignment` (adds alignment, source_tokens). The SavedModel is written to a
    hidden temporary directory, checked (`check_translator_saved_model`) and only then renamed
    to its version number, so a server polling the base path never sees a partial or broken
    version, and a failed export leaves nothing behind. The version carries warm-up requests
    (`assets.extra/tf_serving_warmup_requests`, one `PredictRequest` per signature on
    `warmup_texts`) that stock TF Serving and `keras-attn serve` replay before serving it; a
    compiled translator (`Translator(jit_compile=True)`) has one more request per (batch,
    length) bucket first, so every executable is compiled before the version is AVAILABLE.

    Args:
        translator: the `Translator` module to export.
        model_base_path: the model's base directory (created if needed).
        version: integer version; default: one more than the newest existing version (or 1).
        check: run the contract check before publishing.
        check_sentences: sentences the check translates.
        warmup_texts: the texts of each warm-up request (None: write no warm-up file).

    Returns:
        The version directory.

    Raises:
        keras_attn.errors.PathExistsError: the version exists already (it is never
            overwritten); a FileExistsError.
        keras_attn.errors.ConfigError: a non-positive version.
        keras_attn.export.contract.ContractError: the check failed (nothing is published).
    """
    archive = _archive(
        (translator.model, translator.source_tokenizer, translator.target_tokenizer),
        {
            "serving_default": translator.translate,
            "translate": translator.translate,
            "translate_with_alignment": translator.translate_with_alignment,
        },
    )
    return _publish(
        archive,
        translator.model,
        model_base_path,
        version,
        (lambda path: check_translator_saved_model(path, check_sentences)) if check else None,
        None
        if warmup_texts is None
        else _bucket_feeds(translator, "translate", "text", translator.source_tokenizer, 0)
        + list(translator_warmup_feeds(warmup_texts).items()),
    )


def export_generator(
    generator: Generator,
    model_base_path: str | os.PathLike,
    version: int | None = None,
    check: bool = True,
    check_prompts: list[str] | None = None,
    warmup_prompts: Sequence[str] | None = WARMUP_TEXTS,
) -> Path:
    """Export a GPT `generator` as `model_base_path/<version>/`, published like a translator.

    Signatures: `serving_default` and `generate` (prompt → continuation, tokens, scores) and
    `generate_with_options` (adds the scalar inputs max_length, temperature, top_k, top_p),
    checked by `check_generator_saved_model` before the version directory appears, with one
    warm-up request per signature on `warmup_prompts` (None: none), after one per (batch,
    length) bucket of a compiled generator. Arguments, return value and errors as in
    `export_translator`.
    """
    archive = _archive(
        (generator.model, generator.tokenizer),
        {
            "serving_default": generator.generate,
            "generate": generator.generate,
            "generate_with_options": generator.generate_with_options,
        },
    )
    return _publish(
        archive,
        generator.model,
        model_base_path,
        version,
        (lambda path: check_generator_saved_model(path, check_prompts)) if check else None,
        None
        if warmup_prompts is None
        else _bucket_feeds(generator, "generate", "prompt", generator.tokenizer, 1)
        + list(generator_warmup_feeds(warmup_prompts).items()),
    )


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


def _archive(tracked: Sequence, endpoints: dict) -> keras.export.ExportArchive:
    """An `ExportArchive` tracking `tracked` (in order) with one endpoint per `endpoints` item."""
    archive = keras.export.ExportArchive()
    for resource in tracked:
        archive.track(resource)
    for name, function in endpoints.items():
        archive.add_endpoint(name, function)
    return archive


def _publish(archive, model, model_base_path, version, check, warmup_feeds) -> Path:
    """Write `archive` (and the warm-up requests of `warmup_feeds`, unless None) to a hidden
    directory, run `check(path)`, then rename it to its version."""
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
    disable_cudnn(model)
    try:
        archive.write_out(str(temporary), verbose=False)
        if warmup_feeds is not None:
            write_warmup_requests(temporary, warmup_feeds)
        if check is not None:
            check(temporary)
        os.replace(temporary, final)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
        for path in created:  # a failed first export leaves no empty directories behind
            if path.exists() and not any(path.iterdir()):
                path.rmdir()
    return final
