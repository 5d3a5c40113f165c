"""`keras-attn export`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from keras_attn.errors import (
    ConfigError,
    PathExistsError,
    PathNotADirectoryError,
    PathNotFoundError,
)
from keras_attn.formats import MAX_OUTPUT_LENGTH, MODEL_FILE, RunDirectory


def add_parsers(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "export",
        help="export a trained run as a TF Serving SavedModel",
        description="Write MODEL_BASE_PATH/VERSION/ with the serving_default, translate and "
        "translate_with_alignment signatures (greedy or beam-search decoding inside the graph) "
        "for a translator run, serving_default, generate and generate_with_options for a gpt "
        "run, or serving_default and caption (PNG/JPEG bytes in; caption and attention maps "
        "out) for a show-attend-tell run, then check it loads with only tensorflow + "
        "tensorflow_text.",
    )
    flags = {"run_path": "RUN"}  # `export_run` parameter -> flag, for error messages

    def argument(*names: str, **kwargs: Any) -> None:
        action = parser.add_argument(*names, **kwargs)
        if action.option_strings:
            flags[action.dest] = action.option_strings[0]

    argument("run", help="run directory written by `keras-attn train`")
    argument("--model_base_path", required=True, help="model base directory")
    argument("--version", type=int, default=None, help="default: newest + 1")
    argument(
        "--max-output-length",
        type=int,
        default=None,
        help="most generated tokens (default: 128; a show-attend-tell run: the longest caption "
        "of the scene grammar and END)",
    )
    argument(
        "--decoder",
        choices=("greedy", "beam"),
        default="greedy",
        help="translator decoding (default: greedy); a gpt run decodes greedily in generate and "
        "samples in generate_with_options",
    )
    argument(
        "--beam-size", type=int, default=None, help="hypotheses per sentence (beam; default 4)"
    )
    argument(
        "--length-penalty",
        type=float,
        default=None,
        help="GNMT alpha, lp(Y) = ((5 + |Y|) / 6) ** alpha (beam; default 0.6)",
    )
    argument(
        "--jit-compile",
        action="store_true",
        help="compile the encoder and the decoding loop with XLA (translator and gpt runs), on "
        "inputs padded to shape buckets; serve it with --xla_cpu_compilation_enabled on a CPU",
    )
    argument(
        "--batch-buckets",
        default=None,
        help="comma-separated batch sizes compiled for (--jit-compile; default 1,2,4,8,16,32, "
        "for max_batch_size 32); a larger request is INVALID_ARGUMENT",
    )
    argument(
        "--length-buckets",
        default=None,
        help="comma-separated source lengths (gpt: prompt tokens + START) compiled for "
        "(--jit-compile; default 8,16,32,... and the run's max_length, always the last)",
    )
    argument("--skip-check", action="store_true", help="do not run the contract check")
    parser.set_defaults(func=run_export, flags=flags.get)


def export_run(
    run_path: str | Path,
    model_base_path: str | Path,
    version: int | None = None,
    max_output_length: int | None = None,
    check: bool = True,
    decoder: str = "greedy",
    beam_size: int | None = None,
    length_penalty: float | None = None,
    jit_compile: bool = False,
    batch_buckets: Sequence[int] | None = None,
    length_buckets: Sequence[int] | None = None,
) -> Path:
    """Load a run directory and export it; returns the version directory.

    A translator run is exported by `export_translator` (`beam_size` and `length_penalty`, for
    `decoder="beam"`, default to 4 and 0.6); a language-model run (`model="gpt"`) by
    `export_generator`, whose prompts keep their last `max_length` (the run's) tokens and whose
    continuations have at most `max_output_length` tokens; an image-captioning run
    (`model="show-attend-tell"`) by `keras_attn.export.captioner.export_captioner`, with the
    decoder options of a translator. `max_output_length` defaults to 128, for a captioner to the
    longest caption of the scene grammar plus END. `jit_compile` (translators and GPT) compiles
    the decoding with XLA on inputs padded to `batch_buckets` and `length_buckets`
    (`keras_attn.export.buckets`; sources, or START and the prompt, of at most the run's
    `max_length` tokens). Every mistake (a beam option for a
    greedy or GPT export, a length the GPT's positions cannot hold, a model with non-finite
    weights, a path that is not a finished run) raises a `keras_attn.errors.ConfigError` before
    anything is written.
    """
    run = _check_paths(run_path, model_base_path, version)
    if max_output_length is not None and max_output_length <= 0:
        raise ConfigError(
            f"max_output_length must be positive, got {max_output_length}", ["max_output_length"]
        )
    from keras_attn.models.families import get_family

    config = run.read_config_fields()
    family = get_family(config["model"])
    if not family.exportable:
        raise ConfigError(
            f"a {config['model']} run is not exported: keras-attn export writes translators and "
            "language models (fine-tune it into one with keras-attn train --init-from)",
            ["run_path"],
        )
    beam_options = {"beam_size": beam_size, "length_penalty": length_penalty}
    given = [name for name, value in beam_options.items() if value is not None]
    if decoder != "beam" and given and not family.language_model:
        raise ConfigError(f"{', '.join(given)} only apply to decoder='beam'", ["decoder", *given])
    compiled = {
        "jit_compile": jit_compile,
        "batch_buckets": batch_buckets,
        "length_buckets": length_buckets,
    }
    if family.task == "captioning":
        if jit_compile or batch_buckets is not None or length_buckets is not None:
            raise ConfigError(
                f"no compiled export of a {config['model']} run: jit_compile, batch_buckets and "
                "length_buckets apply to translators and gpt",
                [name for name, value in compiled.items() if value not in (None, False)],
            )
        return _export_captioner(
            run, family, model_base_path, version, max_output_length, check, decoder, beam_options
        )
    if max_output_length is None:
        max_output_length = MAX_OUTPUT_LENGTH
    if family.language_model:
        unusable = [f"decoder={decoder!r}"] * (decoder != "greedy") + given
        if unusable:
            raise ConfigError(
                f"{', '.join(unusable)}: no beam search for a {config['model']} run; its "
                "generate signature decodes greedily, generate_with_options samples "
                "(temperature, top_k, top_p)",
                ["decoder", *given],
            )
        return _export_language_model(
            run, config, family, model_base_path, version, max_output_length, check, compiled
        )
    from keras_attn.export.saved_model import export_translator
    from keras_attn.export.translator import Translator

    model = _load_finite_model(run)
    source_tokenizer, target_tokenizer = run.tokenizers()
    translator = Translator(
        model,
        family.decoding_steps(model, max_output_length),
        source_tokenizer,
        target_tokenizer,
        max_source_length=config["max_length"],
        max_output_length=max_output_length,
        decoder=decoder,
        beam_size=4 if beam_size is None else beam_size,
        length_penalty=0.6 if length_penalty is None else length_penalty,
        **compiled,
    )
    return export_translator(translator, model_base_path, version=version, check=check)


def _check_paths(
    run_path: str | Path, model_base_path: str | Path, version: int | None
) -> RunDirectory:
    """The run to export, once the paths are known to be usable (checked before TensorFlow is
    imported): a finished run, a `model_base_path` that is or can become a directory, and a
    positive `version` not written yet."""
    run = RunDirectory(run_path)
    if not run.exists():
        raise PathNotFoundError(f"{run_path} is not a run directory (no config.json)", ["run_path"])
    if not run.file(MODEL_FILE).exists():
        raise PathNotFoundError(
            f"{run_path} has no {MODEL_FILE}: training did not finish", ["run_path"]
        )
    base = Path(model_base_path)
    existing = next(path for path in (base, *base.parents) if path.exists())
    if not existing.is_dir():
        where = "is" if existing == base else f"lies under {existing}, which is"
        raise PathNotADirectoryError(
            f"model_base_path='{base}' {where} a file, not a directory", ["model_base_path"]
        )
    if version is not None and version <= 0:
        raise ConfigError(f"version must be a positive integer, got {version}", ["version"])
    if version is not None and (base / str(version)).exists():
        raise PathExistsError(
            f"{base / str(version)} exists already; choose another version", ["version"]
        )
    return run


def _load_finite_model(run):
    """The run's model; a ConfigError if a weight holds a NaN or an infinity (a diverged run)."""
    import numpy as np

    model = run.load_model()
    for weight in model.weights:
        if not np.all(np.isfinite(weight.numpy())):
            raise ConfigError(
                f"{run.file(MODEL_FILE)} has non-finite weights ({weight.path}): the run "
                "diverged, so it is not exported",
                ["run_path"],
            )
    return model


def _export_captioner(
    run, family, model_base_path, version, max_output_length, check, decoder, beam_options
):
    """A show-attend-tell run as a `Captioner` SavedModel (image bytes in, captions out)."""
    from keras_attn.export.captioner import MAX_CAPTION_TOKENS, Captioner, export_captioner

    model = _load_finite_model(run)
    length = MAX_CAPTION_TOKENS if max_output_length is None else max_output_length
    captioner = Captioner(
        model,
        family.decoding_steps(model, length),
        run.tokenizer(),
        max_output_length=length,
        decoder=decoder,
        beam_size=4 if beam_options["beam_size"] is None else beam_options["beam_size"],
        length_penalty=(
            0.6 if beam_options["length_penalty"] is None else beam_options["length_penalty"]
        ),
    )
    return export_captioner(captioner, model_base_path, version=version, check=check)


def _export_language_model(
    run, config, family, model_base_path, version, max_output_length, check, compiled
):
    """A GPT run as a `Generator` SavedModel (prompts cut to the run's `max_length` tokens)."""
    from keras_attn.export.generator import Generator
    from keras_attn.export.saved_model import export_generator
    from keras_attn.models.gpt import EMBEDDING

    model = _load_finite_model(run)
    positions = model.get_layer(EMBEDDING).max_length
    max_length = config["max_length"]
    room = positions - 1 - max_length  # after START and the longest kept prompt
    if max_output_length > room:
        raise ConfigError(
            f"max_output_length={max_output_length} does not fit this {config['model']} run: "
            f"its {positions} positions leave {room} tokens after START and a {max_length}-token "
            "prompt",
            ["max_output_length"],
        )
    slots = max_length + 1 + max_output_length
    generator = Generator(
        model,
        family.decoding_steps(model, slots),
        run.tokenizer(),
        max_prompt_length=max_length,
        max_output_length=max_output_length,
        **compiled,
    )
    return export_generator(generator, model_base_path, version=version, check=check)


def run_export(args: argparse.Namespace) -> int:
    """Export `args.run`; a `ConfigError` (a mistake in the flags or the run) propagates."""
    _check_paths(args.run, args.model_base_path, args.version)
    parsed = {}
    for name in ("batch_buckets", "length_buckets"):
        text = getattr(args, name)
        parsed[name] = None if text is None else _parse_buckets(text, name)
    path = export_run(
        args.run,
        args.model_base_path,
        version=args.version,
        max_output_length=args.max_output_length,
        check=not args.skip_check,
        decoder=args.decoder,
        beam_size=args.beam_size,
        length_penalty=args.length_penalty,
        jit_compile=args.jit_compile,
        **parsed,
    )
    print(f"exported {path}")
    return 0


def _parse_buckets(text: str, name: str) -> tuple[int, ...]:
    from keras_attn.export.buckets import parse_buckets

    try:
        return parse_buckets(text, name)
    except ValueError as error:
        raise ConfigError(str(error), [name]) from None
