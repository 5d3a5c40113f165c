"""`keras-attn export`."""

from __future__ import annotations

import argparse


def add_parsers(subparsers) -> None:
    parser = subparsers.add_parser(
        "export",
        help="export a trained run as a TF Serving SavedModel",
        description="Write MODEL_BASE_PATH/VERSION/ with the serving_default, translate and "
        "translate_with_alignment signatures (greedy or beam-search decoding inside the graph) "
        "for a translator run, or serving_default, generate and generate_with_options for a gpt "
        "run, then check it loads with only tensorflow + tensorflow_text.",
    )
    parser.add_argument("run", help="run directory written by `keras-attn train`")
    parser.add_argument("--model_base_path", required=True, help="model base directory")
    parser.add_argument("--version", type=int, default=None, help="default: newest + 1")
    parser.add_argument(
        "--max-output-length", type=int, default=128, help="most generated tokens (128)"
    )
    parser.add_argument(
        "--decoder",
        choices=("greedy", "beam"),
        default="greedy",
        help="translator decoding (default: greedy); a gpt run decodes greedily in generate and "
        "samples in generate_with_options",
    )
    parser.add_argument(
        "--beam-size", type=int, default=None, help="hypotheses per sentence (beam; default 4)"
    )
    parser.add_argument(
        "--length-penalty",
        type=float,
        default=None,
        help="GNMT alpha, lp(Y) = ((5 + |Y|) / 6) ** alpha (beam; default 0.6)",
    )
    parser.add_argument("--skip-check", action="store_true", help="do not run the contract check")
    parser.set_defaults(func=run_export)


def export_run(
    run_path,
    model_base_path,
    version=None,
    max_output_length=128,
    check=True,
    decoder="greedy",
    beam_size=None,
    length_penalty=None,
):
    """Load a run directory and export it; returns the version directory.

    A translator run is exported by `export_translator` (`beam_size` and `length_penalty`, for
    `decoder="beam"`, default to 4 and 0.6); a language-model run (`--model gpt`) by
    `export_generator`, whose prompts keep their last `max_length` (the run's) tokens and whose
    continuations have at most `max_output_length` tokens. Every mistake (a beam option for a
    greedy or GPT export, a length the GPT's positions cannot hold, a model with non-finite
    weights) raises ValueError before anything is written.
    """
    from keras_attn.models.registry import get_family
    from keras_attn.training.trainer import RunDirectory

    run = RunDirectory(run_path)
    if not run.exists():
        raise FileNotFoundError(f"{run_path} is not a run directory (no config.json)")
    if not run.file("model.keras").exists():
        raise FileNotFoundError(f"{run_path} has no model.keras: training did not finish")
    if max_output_length <= 0:
        raise ValueError(f"--max-output-length must be positive, got {max_output_length}")
    config = run.read_config()
    family = get_family(config.model)
    beam_options = {"--beam-size": beam_size, "--length-penalty": length_penalty}
    given = [flag for flag, value in beam_options.items() if value is not None]
    if family.language_model:
        unusable = [f"--decoder {decoder}"] * (decoder != "greedy") + given
        if unusable:
            raise ValueError(
                f"{', '.join(unusable)}: no beam search for a {config.model} run; its generate "
                "signature decodes greedily, generate_with_options samples "
                "(temperature, top_k, top_p)"
            )
        return _export_language_model(
            run, config, family, model_base_path, version, max_output_length, check
        )
    if decoder != "beam" and given:
        raise ValueError(f"{', '.join(given)} only apply to --decoder beam")
    from keras_attn.export.saved_model import export_translator
    from keras_attn.export.translator import Translator

    model = _load_finite_model(run)
    source_tokenizer, target_tokenizer = run.tokenizers()
    translator = Translator(
        model,
        family.decoding_steps(model, max_output_length),
        source_tokenizer,
        target_tokenizer,
        max_source_length=config.max_length,
        max_output_length=max_output_length,
        decoder=decoder,
        beam_size=4 if beam_size is None else beam_size,
        length_penalty=0.6 if length_penalty is None else length_penalty,
    )
    return export_translator(translator, model_base_path, version=version, check=check)


def _load_finite_model(run):
    """The run's model; ValueError if a weight holds a NaN or an infinity (a diverged run)."""
    import numpy as np

    model = run.load_model()
    for weight in model.weights:
        if not np.all(np.isfinite(weight.numpy())):
            raise ValueError(
                f"{run.file('model.keras')} has non-finite weights ({weight.path}): the run "
                "diverged, so it is not exported"
            )
    return model


def _export_language_model(run, config, family, model_base_path, version, max_output_length, check):
    """A GPT run as a `Generator` SavedModel (prompts cut to the run's `max_length` tokens)."""
    from keras_attn.export.generator import Generator
    from keras_attn.export.saved_model import export_generator
    from keras_attn.models.gpt import EMBEDDING

    model = _load_finite_model(run)
    positions = model.get_layer(EMBEDDING).max_length
    room = positions - 1 - config.max_length  # after START and the longest kept prompt
    if max_output_length > room:
        raise ValueError(
            f"--max-output-length {max_output_length} does not fit this {config.model} run: its "
            f"{positions} positions leave {room} tokens after START and a {config.max_length}-"
            "token prompt"
        )
    slots = config.max_length + 1 + max_output_length
    generator = Generator(
        model,
        family.decoding_steps(model, slots),
        run.tokenizer(),
        max_prompt_length=config.max_length,
        max_output_length=max_output_length,
    )
    return export_generator(generator, model_base_path, version=version, check=check)


def run_export(args: argparse.Namespace) -> int:
    from keras_attn.cli import UserError
    from keras_attn.export.contract import ContractError

    try:
        path = export_run(
            args.run,
            args.model_base_path,
            version=args.version,
            max_output_length=args.max_output_length,
            check=not args.skip_check,
            decoder=args.decoder,
            beam_size=args.beam_size,
            length_penalty=args.length_penalty,
        )
    except (FileNotFoundError, FileExistsError, ValueError, ContractError) as error:
        raise UserError(str(error)) from error
    print(f"exported {path}")
    return 0
