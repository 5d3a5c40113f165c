"""`keras-attn serve` and `keras-attn translate`.

    keras-attn serve --port 8500 [--rest_api_port 8501] [--model_name default] \\
        --model_base_path models/translator [--host 127.0.0.1]
    keras-attn serve --port 8500 --model_config_file models.config [--enable_batching \\
        --batching_parameters_file batching.txt] [--monitoring_config_file monitoring.txt]
    keras-attn translate --server localhost:8500 [--model_name default] "Ein Satz." ...

`serve` takes the stock `tensorflow_model_server` flag names, prints one line once it answers
(`Serving NAME version N[, NAME2 version M] on HOST:PORT (gRPC)[, REST on HOST:PORT]`) and
runs until SIGINT or SIGTERM, then stops gracefully and exits 0. `translate` prints one
translation per line; when no server answers it prints
`cannot reach a model server at HOST:PORT (UNAVAILABLE)` and exits 1. Both name the model
`default` unless told otherwise, as the stock server does.

TensorFlow is imported inside the handlers only, after the checks of the flags that need none,
so `keras-attn --help` and a mistake in a flag are quick.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from keras_attn.errors import UserError
from keras_attn.serving.limits import RequestLimits

DEFAULT_MODEL_NAME = "default"  # stock tensorflow_model_server's --model_name
_LIMIT_HELP = {
    "max_request_bytes": "largest gRPC message or REST body in bytes",
    "max_rows_per_request": "largest first dimension of an input tensor, or number of examples",
    "max_string_bytes": "longest string element in bytes",
    "max_fill_bytes": "bytes a tensor may grow by when it declares more elements than it carries",
    "max_json_depth": "deepest nesting of a REST body's JSON",
}
_TARGET = re.compile(r"^(?:dns:///)?(?:\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+):(\d{1,5})$")


def _bool_flag(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _number_type(convert: Callable[[str], Any], kind: str, accept, out_of_range: str):
    """An argparse `type`: `convert(text)`, checked by `accept`; `out_of_range` is formatted with
    `text` and `value` for a value `accept` refuses."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(out_of_range.format(text=text, value=value))
        return value

    return parse


_port = _number_type(
    int, "a port number", lambda v: 0 <= v <= 65535, "expected a port in 0..65535, got {value}"
)
_positive_seconds = _number_type(
    float, "seconds", lambda v: v > 0, "expected a positive number of seconds, got {text}"
)
_seconds = _number_type(float, "seconds", lambda v: v >= 0, "expected seconds >= 0, got {text}")
_positive_count = _number_type(
    int, "an integer", lambda v: v > 0, "expected an integer > 0, got {value}"
)
_count = _number_type(int, "an integer", lambda v: v >= 0, "expected an integer >= 0, got {value}")


def _add_bool_flag(parser: argparse.ArgumentParser, flag: str, default: bool, help: str) -> None:
    """`--flag` alone means true; `--flag=false` (or 0, no) turns it off, as in the stock server."""
    parser.add_argument(flag, type=_bool_flag, nargs="?", const=True, default=default, help=help)


def add_parsers(subparsers: Any) -> None:
    """Registers `serve` and `translate` on an argparse subparsers object."""
    serve = subparsers.add_parser(
        "serve",
        help="serve a SavedModel over TensorFlow Serving's gRPC (and REST) API",
        description=(
            "Serve the latest integer version under --model_base_path, or the models of "
            "--model_config_file, with TensorFlow Serving's gRPC API (PredictionService, "
            "ModelService, health, reflection) and, with --rest_api_port, its REST API. New "
            "versions are picked up without a restart. Stops gracefully on SIGINT/SIGTERM."
        ),
    )
    serve.add_argument(
        "--port", type=_port, default=8500, help="gRPC port (default 8500; 0: any free port)"
    )
    serve.add_argument(
        "--rest_api_port", type=_port, default=0, help="REST port (default 0: no REST API)"
    )
    serve.add_argument(
        "--model_name",
        default=DEFAULT_MODEL_NAME,
        help=f"the name clients ask for (default {DEFAULT_MODEL_NAME!r})",
    )
    serve.add_argument(
        "--model_base_path",
        default="",
        help="directory holding integer-named SavedModel versions (MODEL_BASE_PATH/1/, ...)",
    )
    serve.add_argument(
        "--model_config_file",
        default="",
        help="a text ModelServerConfig: several models, version policies, labels (overrides "
        "--model_name and --model_base_path)",
    )
    serve.add_argument(
        "--model_config_file_poll_wait_seconds",
        type=_seconds,
        default=0.0,
        help="re-read --model_config_file this often (default 0: never)",
    )
    serve.add_argument(
        "--file_system_poll_wait_seconds",
        type=_seconds,
        default=1.0,
        help="poll the model directories for new versions this often (default 1; 0: once). At "
        "start-up a missing or empty base path is waited for, with one line per poll (0: it fails "
        "at once)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    _add_bool_flag(
        serve,
        "--enable_signature_method_name_check",
        False,
        "require matching method names for Classify/Regress/Predict (stock flag; off)",
    )
    _add_bool_flag(
        serve, "--enable_batching", False, "merge concurrent requests into one model call"
    )
    serve.add_argument("--batching_parameters_file", default="", help="a text BatchingParameters")
    _add_bool_flag(
        serve,
        "--allow_version_labels_for_unavailable_models",
        False,
        "let labels name versions that are not loaded yet (stock flag; off)",
    )
    _add_bool_flag(
        serve,
        "--enable_model_warmup",
        True,
        "replay assets.extra/tf_serving_warmup_requests at load (default true)",
    )
    serve.add_argument(
        "--num_request_iterations_for_warmup",
        type=_count,
        default=1,
        help="times each warm-up request runs (default 1)",
    )
    serve.add_argument(
        "--max_num_load_retries",
        type=_count,
        default=5,
        help="retries of a failed version load (default 5)",
    )
    serve.add_argument(
        "--load_retry_interval_micros",
        type=_count,
        default=60_000_000,
        help="microseconds between load retries (default one minute)",
    )
    serve.add_argument(
        "--grpc_channel_arguments",
        default="",
        help="gRPC server arguments key=value,... e.g. grpc.max_receive_message_length=1048576",
    )
    serve.add_argument(
        "--rest_api_timeout_in_ms",
        type=_count,
        default=30_000,
        help="deadline of each REST request in milliseconds (default 30000)",
    )
    serve.add_argument(
        "--grpc_max_threads", type=_count, default=16, help="threads answering gRPC (default 16)"
    )
    serve.add_argument(
        "--rest_api_num_threads",
        type=_positive_count,
        default=16,
        help="threads answering REST requests (default 16)",
    )
    for field in dataclasses.fields(RequestLimits):
        serve.add_argument(
            f"--{field.name}",
            type=_positive_count,
            default=field.default,
            help=f"{_LIMIT_HELP[field.name]} (default {field.default:,}; docs/serving.md)",
        )
    _add_bool_flag(
        serve,
        "--xla_cpu_compilation_enabled",
        False,
        "allow XLA JIT compilation (stock flag; off: a signature calling a "
        "tf.function(jit_compile=True) loads but fails with INTERNAL 'XLA compilation disabled')",
    )
    serve.add_argument(
        "--monitoring_config_file",
        default="",
        help="a text MonitoringConfig; prometheus_config { enable: true } serves metrics on "
        "the REST port at its path (default /monitoring/prometheus/metrics)",
    )
    _add_bool_flag(
        serve,
        "--ui",
        False,
        "serve the attention viewer page at / on the REST port (needs --rest_api_port; off)",
    )
    serve.set_defaults(func=run_serve)

    translate = subparsers.add_parser(
        "translate",
        help="translate texts with a served translator",
        description="Send texts to a model server over gRPC and print one translation per line.",
    )
    translate.add_argument(
        "--server",
        required=True,
        help="the model server as HOST:PORT, or dns:///HOST:PORT to spread calls round-robin "
        "over every address HOST resolves to (a Kubernetes headless Service)",
    )
    translate.add_argument(
        "--model_name",
        default=DEFAULT_MODEL_NAME,
        help=f"served model name (default {DEFAULT_MODEL_NAME!r}, the name keras-attn serve and "
        "tensorflow_model_server give a model when --model_name is not given)",
    )
    translate.add_argument(
        "--signature", default="serving_default", help="signature to call (default serving_default)"
    )
    translate.add_argument(
        "--timeout", type=_positive_seconds, default=30.0, help="seconds per request (default 30)"
    )
    translate.add_argument(
        "--alignment",
        action="store_true",
        help="call translate_with_alignment and print each translation with a text heatmap of "
        "its attention over the source tokens",
    )
    translate.add_argument("texts", nargs="+", metavar="TEXT", help="texts to translate")
    translate.set_defaults(func=run_translate)


def run_serve(args: argparse.Namespace) -> int:
    """Serves until SIGINT/SIGTERM; raises `UserError` for a bad model directory or port.

    XLA compilation is switched on or off for the whole process before any model loads, as the
    stock server's main() does, and switched back when serving ends (for a caller that goes on).
    """
    _check_serve_flags(args)
    from keras_attn.serving.xla import set_xla_compilation_enabled, xla_compilation_enabled

    try:
        before = xla_compilation_enabled()
        set_xla_compilation_enabled(args.xla_cpu_compilation_enabled)
    except RuntimeError as error:
        raise UserError(str(error)) from None
    try:
        return _serve(args)
    finally:
        set_xla_compilation_enabled(before)


def _check_serve_flags(args: argparse.Namespace) -> None:
    """The stock server's start-up checks that need no TensorFlow, with its messages and in its
    order, so that these mistakes are reported before TensorFlow is imported (`ModelServer.start`
    makes them again). Raises `UserError`."""
    if not args.model_base_path and not args.model_config_file:
        raise UserError(
            "Both server_options.model_base_path and server_options.model_config_file are empty!"
        )
    _check_readable(args.model_config_file)
    if args.batching_parameters_file and not args.enable_batching:
        raise UserError(
            "server_options.batching_parameters_file is set without setting "
            "server_options.enable_batching to true."
        )
    _check_readable(args.batching_parameters_file)
    _check_readable(args.monitoring_config_file)
    if args.ui and not args.rest_api_port:
        raise UserError("--ui serves its page on the REST port: give --rest_api_port too")
    waits_for_it = args.model_config_file or args.file_system_poll_wait_seconds > 0
    if not waits_for_it and not os.path.isdir(args.model_base_path):
        raise UserError(
            f"Could not find base path {args.model_base_path} for servable "
            f"{args.model_name or DEFAULT_MODEL_NAME}"
        )


def _check_readable(path: str) -> None:
    """A `UserError` worded as `keras_attn.serving.config.read_text_proto`'s NOT_FOUND when a
    given config file cannot be opened."""
    if not path:
        return
    try:
        with open(path, encoding="utf-8"):
            pass
    except OSError as error:
        raise UserError(f"{path}; {error.strerror or 'cannot read file'}") from None


def _serve(args: argparse.Namespace) -> int:
    from keras_attn.serving.servable import LoadError
    from keras_attn.serving.server import ModelServer, StartInterrupted

    server = ModelServer(
        args.model_name,
        args.model_base_path,
        port=args.port,
        host=args.host,
        rest_api_port=args.rest_api_port or None,
        max_workers=args.grpc_max_threads,
        enable_signature_method_name_check=args.enable_signature_method_name_check,
        model_config_file=args.model_config_file or None,
        model_config_file_poll_wait_seconds=args.model_config_file_poll_wait_seconds,
        file_system_poll_wait_seconds=args.file_system_poll_wait_seconds,
        enable_batching=args.enable_batching,
        batching_parameters_file=args.batching_parameters_file or None,
        allow_version_labels_for_unavailable_models=args.allow_version_labels_for_unavailable_models,
        enable_model_warmup=args.enable_model_warmup,
        num_request_iterations_for_warmup=args.num_request_iterations_for_warmup,
        max_num_load_retries=args.max_num_load_retries,
        load_retry_interval_micros=args.load_retry_interval_micros,
        grpc_channel_arguments=args.grpc_channel_arguments,
        monitoring_config_file=args.monitoring_config_file or None,
        rest_api_timeout_in_ms=args.rest_api_timeout_in_ms,
        rest_api_num_threads=args.rest_api_num_threads,
        limits=RequestLimits(
            **{f.name: getattr(args, f.name) for f in dataclasses.fields(RequestLimits)}
        ),
        ui=args.ui,
    )
    stop = threading.Event()

    def on_signal(*_: object) -> None:
        stop.set()
        server.interrupt()  # a start-up still loading gives up after the current version

    previous = {
        signum: signal.signal(signum, on_signal) for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        try:
            server.start()
        except StartInterrupted:
            print("Stopped before serving (interrupted while loading).", flush=True)
            return 0
        except (LoadError, OSError, ValueError) as error:
            raise UserError(str(error)) from None
        try:
            print(f"Serving {server.describe_models()} on {server.describe()}", flush=True)
            while not stop.wait(1.0):
                pass
        finally:
            server.stop()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    names = ", ".join(model.name for model in server.manager.config.model_config_list.config)
    print(f"Stopped serving {names}.", flush=True)
    return 0


def run_translate(args: argparse.Namespace) -> int:
    """Prints one translation per line; 1 when the call fails, 2 for a malformed --server."""
    if not _TARGET.match(args.server):
        raise UserError(f"--server must be HOST:PORT or dns:///HOST:PORT, got {args.server!r}")
    if args.alignment and args.signature != "serving_default":
        raise UserError("--alignment calls translate_with_alignment: leave out --signature")
    from keras_attn.serving.client import ServerUnavailableError, ServingError, TranslatorClient

    try:
        with TranslatorClient(args.server, args.model_name, args.timeout) as client:
            if args.alignment:
                outputs = client.translate_with_alignment(args.texts)
            else:
                translations = client.translate(args.texts, signature_name=args.signature)
    except ServerUnavailableError:
        print(
            f"keras-attn translate: cannot reach a model server at {args.server} (UNAVAILABLE)",
            file=sys.stderr,
        )
        return 1
    except ServingError as error:
        message = " ".join(error.message.split())
        print(f"keras-attn translate: {error.code.name}: {message}", file=sys.stderr)
        return 1
    except ValueError as error:
        print(f"keras-attn translate: {error}", file=sys.stderr)
        return 1
    if args.alignment:
        _print_alignments(outputs)
        return 0
    for translation in translations:
        print(translation)
    return 0


def _print_alignments(outputs: dict) -> None:
    """Each translation, then its text heatmap (`keras_attn.serving.heatmap`), a blank line
    between sentences and the shades' legend at the end."""
    from keras_attn.serving.heatmap import LEGEND, text_heatmap

    for i, translation in enumerate(outputs["translation"]):
        if i:
            print()
        print(translation)
        print(
            text_heatmap(
                list(outputs["source_tokens"][i]),
                list(outputs["tokens"][i]),
                outputs["alignment"][i],
            )
        )
    print()
    print(LEGEND)
