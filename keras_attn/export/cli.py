"""`keras-attn export`."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from keras_attn.errors import (
    ConfigError,
    PathExistsError,
    PathNotADirectoryError,
    PathNotFoundError,
    UserError,
)
from keras_attn.export.kinds import (
    EXPORT_KINDS,
    ExportOptions,
    check_beam_options,
)
from keras_attn.formats import MAX_OUTPUT_LENGTH, MODEL_FILE, RunDirectory, check_finite

# The flags that only apply to --keras-model, by `export_keras_model` parameter.
KERAS_MODEL_FLAGS = {
    "source_vocabulary": "--source-vocab",
    "target_vocabulary": "--target-vocab",
    "imports": "--import",
    "source_input": "--source-input",
    "target_input": "--target-input",
    "outputs": "--outputs",
    "max_source_length": "--max-source-length",
}


def add_parsers(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "export",
        help="export a trained run or a .keras translator as a TF Serving SavedModel",
        description="Write MODEL_BASE_PATH/VERSION/ with the serving_default, translate and "
        "translate_with_alignment signatures (greedy or beam-search decoding inside the graph) "
        "for a translator run, serving_default, generate and generate_with_options for a "
        "language-model run (gpt, rnn-lm), or serving_default and caption (PNG/JPEG bytes in; "
        "caption and attention maps out) for a show-attend-tell run, or serving_default and "
        "answer (PNG/JPEG bytes and a question in; answer, its probabilities and attention maps "
        "out) for a vqa-coattention run, then check it loads with only tensorflow + "
        "tensorflow_text. --keras-model exports any Keras translator instead of a run: a model "
        "mapping (source_ids, target_ids) to next-token scores, decoded by rerunning it on the "
        "target prefix (serving_default and translate; no alignments).",
    )
    flags = {"run_path": "RUN", **KERAS_MODEL_FLAGS}  # parameter -> flag, for error messages

    keras_model_options = []  # the actions of the --keras-model options group

    def argument(*names: str, group: Any = None, **kwargs: Any) -> None:
        action = (group or parser).add_argument(*names, **kwargs)
        if action.option_strings:
            flags.setdefault(action.dest, action.option_strings[0])
        if group is not None and group is not source:
            keras_model_options.append(action)

    source = parser.add_mutually_exclusive_group(required=True)
    argument(
        "run",
        group=source,
        nargs="?",
        metavar="RUN",
        help="run directory written by `keras-attn train`",
    )
    argument(
        "--keras-model",
        group=source,
        metavar="FILE.keras",
        help="a Keras translator saved with model.save (instead of RUN): inputs source and "
        "target ids, output next-token logits or probabilities (batch, T_y, V)",
    )
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
        help="translator decoding (default: greedy); a language-model run decodes greedily in "
        "generate and samples in generate_with_options",
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
        help="compile the encoder and the decoding loop with XLA (translator and language-model "
        "runs), on inputs padded to shape buckets; serve it with --xla_cpu_compilation_enabled "
        "on a CPU",
    )
    argument(
        "--batch-buckets",
        default=None,
        help="comma-separated batch sizes compiled for (--jit-compile; default 1,8,32, "
        "for max_batch_size 32); a larger request is INVALID_ARGUMENT",
    )
    argument(
        "--length-buckets",
        default=None,
        help="comma-separated source lengths (language models: prompt tokens + START) compiled "
        "for (--jit-compile; default powers of two from 16 up to half the run's max_length, then "
        "its max_length, always the last)",
    )
    argument("--skip-check", action="store_true", help="do not run the contract check")
    keras_model = parser.add_argument_group("--keras-model options")
    argument(
        "--source-vocab",
        group=keras_model,
        metavar="FILE",
        help="source vocabulary, one token per line, [PAD] [UNK] [START] [END] first",
    )
    argument(
        "--target-vocab", group=keras_model, metavar="FILE", help="target vocabulary, as above"
    )
    argument(
        "--import",
        group=keras_model,
        dest="imports",
        action="append",
        default=None,
        metavar="MODULE",
        help="a module to import before loading the model, e.g. the one that registers your "
        "own layers, or keras_hub (repeatable; the current directory is on the path)",
    )
    argument(
        "--source-input",
        group=keras_model,
        default=None,
        help="the model's source input: a name or a position (default: source_ids, else the "
        "first of two inputs)",
    )
    argument(
        "--target-input",
        group=keras_model,
        default=None,
        help="the model's target input (default: target_ids, else the second)",
    )
    argument(
        "--outputs",
        group=keras_model,
        choices=("logits", "probabilities"),
        default=None,
        help="what the model returns (default: told apart by a probe; probabilities are a "
        "final softmax)",
    )
    argument(
        "--max-source-length",
        group=keras_model,
        type=int,
        default=None,
        help="source tokens kept per sentence (default 128)",
    )
    parser.set_defaults(
        func=run_export, flags=flags.get, keras_model_options=tuple(keras_model_options)
    )


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

    The kind of the run's family exports it (`keras_attn.export.kinds.EXPORT_KINDS`) and refuses
    the options that do not apply to it. A translator run is exported by `export_translator`
    (`beam_size` and `length_penalty`, for `decoder="beam"`, default to 4 and 0.6); a generator
    run by `export_generator`, whose prompts keep their last `max_length` (the run's) tokens and
    whose continuations have at most `max_output_length` tokens; a captioner run by
    `keras_attn.export.captioner.export_captioner`, with the decoder options of a translator; a
    classifier or tagger run by `keras_attn.export.classifier.export_classifier_run`, and a
    question-answering run by `keras_attn.export.answerer.export_answerer_run`, with no
    decoding option. `max_output_length` defaults to 128, for a captioner to the longest caption
    of the scene grammar plus END. `jit_compile` (translators and generators) compiles the
    decoding with XLA on inputs padded to `batch_buckets` and `length_buckets`
    (`keras_attn.export.buckets`; sources, or START and the prompt, of at most the run's
    `max_length` tokens). Every mistake (a beam option for a greedy or generator export, a
    length the generator's positions cannot hold, a model with non-finite weights, a path that
    is not a finished run) raises a `keras_attn.errors.ConfigError` before anything is written.
    """
    run = _check_paths(run_path, model_base_path, version)
    if max_output_length is not None and max_output_length <= 0:
        raise ConfigError(
            f"max_output_length must be positive, got {max_output_length}", ["max_output_length"]
        )
    family = run.family()
    kind = EXPORT_KINDS.get(family.kind) if family.exportable else None
    if kind is None:
        raise ConfigError(
            f"a {run.read_config_fields()['model']} run is not exported: keras-attn export "
            "writes translators, language models, captioners, classifiers, taggers and "
            "question answerers "
            "(fine-tune it into one with keras-attn train --init-from)",
            ["run_path"],
        )
    options = ExportOptions(
        max_output_length=max_output_length,
        decoder=decoder,
        beam_size=beam_size,
        length_penalty=length_penalty,
        jit_compile=jit_compile,
        batch_buckets=batch_buckets,
        length_buckets=length_buckets,
    )
    return kind.export_run(run, family, model_base_path, version, check, options)


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
    _check_base_path(model_base_path, version)
    return run


def _check_base_path(model_base_path: str | Path, version: int | None) -> None:
    """Raise unless `model_base_path` is or can become a directory and `version` (if given) is
    positive and not written yet."""
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


def export_keras_model(
    keras_model: str | Path,
    source_vocabulary: str | Path,
    target_vocabulary: str | Path,
    model_base_path: str | Path,
    version: int | None = None,
    imports: Sequence[str] = (),
    max_output_length: int | None = None,
    max_source_length: int | None = None,
    check: bool = True,
    decoder: str = "greedy",
    beam_size: int | None = None,
    length_penalty: float | None = None,
    jit_compile: bool = False,
    batch_buckets: Sequence[int] | None = None,
    length_buckets: Sequence[int] | None = None,
    source_input: str | int | None = None,
    target_input: str | int | None = None,
    outputs: str | None = None,
) -> Path:
    """Load a `.keras` translator and export it with `keras_attn.export.export_translator`.

    `imports` are imported first (modules that register the model's own layers, or `keras_hub`),
    with the current directory on `sys.path`. The model is decoded by
    `keras_attn.export.PrefixSteps` (`source_input`, `target_input` and `outputs` as there);
    `beam_size` and `length_penalty` (`decoder="beam"` only) default to 4 and 0.6,
    `max_source_length` to 128 and `max_output_length` to 128. Every mistake (a missing file, a
    module that does not import, a beam option for a greedy export, non-finite weights, a model
    that is not causal, a vocabulary without the reserved tokens) raises a
    `keras_attn.errors.ConfigError` before anything is written; returns the version directory.
    """
    _check_keras_model_paths(keras_model, source_vocabulary, target_vocabulary)
    _check_base_path(model_base_path, version)
    for name, value in [
        ("max_output_length", max_output_length),
        ("max_source_length", max_source_length),
    ]:
        if value is not None and value <= 0:
            raise ConfigError(f"{name} must be positive, got {value}", [name])
    beam = ExportOptions(decoder=decoder, beam_size=beam_size, length_penalty=length_penalty)
    check_beam_options(beam)
    _import_modules(imports)
    import keras

    from keras_attn.export.saved_model import export_translator

    try:
        model = keras.saving.load_model(keras_model)
    except (TypeError, ValueError) as error:  # an unknown layer class, a file of another kind
        unknown = re.search(r"Could not locate (?:class|function) '[^']+'", str(error))
        if unknown:  # a class no imported module registered
            reason = (
                f"{unknown.group(0)} (a model with its own layers needs the module that "
                "registers them in imports)"
            )
        else:
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ConfigError(
            f"keras_model='{keras_model}' does not load: {reason}", ["keras_model", "imports"]
        ) from None
    check_finite(model, keras_model, "it did not train", "keras_model")
    return export_translator(
        model,
        source_vocabulary,
        target_vocabulary,
        model_base_path,
        version=version,
        decoder=decoder,
        **beam.beam(),
        jit_compile=jit_compile,
        max_source_length=128 if max_source_length is None else max_source_length,
        max_output_length=MAX_OUTPUT_LENGTH if max_output_length is None else max_output_length,
        source_input=source_input,
        target_input=target_input,
        outputs=outputs,
        batch_buckets=batch_buckets,
        length_buckets=length_buckets,
        check=check,
    )


def _check_keras_model_paths(keras_model, source_vocabulary, target_vocabulary) -> None:
    """Raise unless the model and both vocabularies are files (checked before TensorFlow)."""
    for name, path in (
        ("keras_model", keras_model),
        ("source_vocabulary", source_vocabulary),
        ("target_vocabulary", target_vocabulary),
    ):
        if not Path(path).is_file():
            raise PathNotFoundError(f"{name}='{path}' is not a file", [name])


def _import_modules(modules: Sequence[str]) -> None:
    """Import each of `modules`, as `python -m` would find them (the current directory first)."""
    import importlib
    import sys

    if modules and "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ConfigError(f"imports={module!r} does not import: {error}", ["imports"]) from None


def run_export(args: argparse.Namespace) -> int:
    """Export `args.run` or `args.keras_model`; a `ConfigError` (a mistake in the flags, the run
    or the model) propagates."""
    if args.keras_model is not None:
        return _run_keras_model_export(args)
    misplaced = [
        action.option_strings[0]
        for action in args.keras_model_options
        if getattr(args, action.dest) is not None
    ]
    if misplaced:
        verb = "applies" if len(misplaced) == 1 else "apply"
        raise UserError(f"{', '.join(misplaced)} only {verb} to --keras-model, not to RUN")
    _check_paths(args.run, args.model_base_path, args.version)
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
        **_buckets(args),
    )
    print(f"exported {path}")
    return 0


def _run_keras_model_export(args: argparse.Namespace) -> int:
    missing = [
        flag
        for name, flag in (("source_vocab", "--source-vocab"), ("target_vocab", "--target-vocab"))
        if getattr(args, name) is None
    ]
    if missing:
        raise UserError(f"--keras-model needs {' and '.join(missing)}")
    path = export_keras_model(
        args.keras_model,
        args.source_vocab,
        args.target_vocab,
        args.model_base_path,
        version=args.version,
        imports=args.imports or (),
        max_output_length=args.max_output_length,
        max_source_length=args.max_source_length,
        check=not args.skip_check,
        decoder=args.decoder,
        beam_size=args.beam_size,
        length_penalty=args.length_penalty,
        jit_compile=args.jit_compile,
        source_input=_input_name(args.source_input),
        target_input=_input_name(args.target_input),
        outputs=args.outputs,
        **_buckets(args),
    )
    print(f"exported {path}")
    return 0


def _input_name(text: str | None) -> str | int | None:
    """A model input as given on the command line: a position when it is a number."""
    return int(text) if text is not None and text.isdigit() else text


def _buckets(args: argparse.Namespace) -> dict:
    parsed = {}
    for name in ("batch_buckets", "length_buckets"):
        text = getattr(args, name)
        parsed[name] = None if text is None else _parse_buckets(text, name)
    return parsed


def _parse_buckets(text: str, name: str) -> tuple[int, ...]:
    from keras_attn.export.buckets import parse_buckets

    try:
        return parse_buckets(text, name)
    except ValueError as error:
        raise ConfigError(str(error), [name]) from None
