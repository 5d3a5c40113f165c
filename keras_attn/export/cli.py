"""`keras-attn export`."""

from __future__ import annotations

import argparse


def add_parsers(subparsers) -> None:
    parser = subparsers.add_parser(
        "export",
        help="export a trained run as a TF Serving SavedModel",
        description="Write MODEL_BASE_PATH/VERSION/ with the serving_default, translate and "
        "translate_with_alignment signatures (greedy decoding inside the graph), then check it "
        "loads with only tensorflow + tensorflow_text.",
    )
    parser.add_argument("run", help="run directory written by `keras-attn train`")
    parser.add_argument("--model_base_path", required=True, help="model base directory")
    parser.add_argument("--version", type=int, default=None, help="default: newest + 1")
    parser.add_argument("--max-output-length", type=int, default=128)
    parser.add_argument("--skip-check", action="store_true", help="do not run the contract check")
    parser.set_defaults(func=run_export)


def export_run(run_path, model_base_path, version=None, max_output_length=128, check=True):
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
    )
    return export_translator(translator, model_base_path, version=version, check=check)


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
        )
    except (FileNotFoundError, FileExistsError, ValueError, ContractError) as error:
        raise UserError(str(error)) from error
    print(f"exported {path}")
    return 0
