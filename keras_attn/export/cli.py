"""`keras-attn export`."""

from __future__ import annotations

import argparse


def add_parsers(subparsers) -> None:
    parser = subparsers.add_parser(
        "export",
        help="export a trained run as a TF Serving SavedModel",
        description="Write MODEL_BASE_PATH/VERSION/ with the serving_default, translate and "
        "translate_with_alignment signatures (greedy or beam-search decoding inside the graph), "
        "then check it loads with only tensorflow + tensorflow_text.",
    )
    parser.add_argument("run", help="run directory written by `keras-attn train`")
    parser.add_argument("--model_base_path", required=True, help="model base directory")
    parser.add_argument("--version", type=int, default=None, help="default: newest + 1")
    parser.add_argument("--max-output-length", type=int, default=128)
    parser.add_argument(
        "--decoder", choices=("greedy", "beam"), default="greedy", help="default: greedy"
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
    beam_size=4,
    length_penalty=0.6,
):
    """Load a run directory and export it; returns the version directory."""
    from keras_attn.export.saved_model import export_translator
    from keras_attn.export.translator import Translator
    from keras_attn.models.registry import get_family
    from keras_attn.training.trainer import RunDirectory

    run = RunDirectory(run_path)
    if not run.exists():
        raise FileNotFoundError(f"{run_path} is not a run directory (no config.json)")
    if not run.file("model.keras").exists():
        raise FileNotFoundError(f"{run_path} has no model.keras: training did not finish")
    config = run.read_config()
    model = run.load_model()
    source_tokenizer, target_tokenizer = run.tokenizers()
    translator = Translator(
        model,
        get_family(config.model).decoding_steps(model, max_output_length),
        source_tokenizer,
        target_tokenizer,
        max_source_length=config.max_length,
        max_output_length=max_output_length,
        decoder=decoder,
        beam_size=beam_size,
        length_penalty=length_penalty,
    )
    return export_translator(translator, model_base_path, version=version, check=check)


def run_export(args: argparse.Namespace) -> int:
    from keras_attn.cli import UserError
    from keras_attn.export.contract import ContractError

    beam_options = {"beam_size": args.beam_size, "length_penalty": args.length_penalty}
    given = [name for name, value in beam_options.items() if value is not None]
    if args.decoder != "beam" and given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise UserError(f"{flags} only apply to --decoder beam")
    try:
        path = export_run(
            args.run,
            args.model_base_path,
            version=args.version,
            max_output_length=args.max_output_length,
            check=not args.skip_check,
            decoder=args.decoder,
            beam_size=4 if args.beam_size is None else args.beam_size,
            length_penalty=0.6 if args.length_penalty is None else args.length_penalty,
        )
    except (FileNotFoundError, FileExistsError, ValueError, ContractError) as error:
        raise UserError(str(error)) from error
    print(f"exported {path}")
    return 0
