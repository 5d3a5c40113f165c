"""The exported kinds: how `keras-attn export` writes a run of each `Family.kind`.

`EXPORT_KINDS` maps a kind ("translator", "generator", "captioner", "classifier", "tagger",
"answerer") to one `ExportKind`, which refuses the export options that do not apply to its
runs (its `refusals` table) and exports a run with `export_run`.
`keras_attn.export.cli.export_run` looks the kind up and calls it: a new family of one of these
kinds exports with no change here.

TensorFlow is imported when a run is exported, not when this module is, so that the command
line checks its paths and options first.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keras_attn.errors import ConfigError
from keras_attn.formats import MAX_OUTPUT_LENGTH, RunDirectory, load_finite_model

if TYPE_CHECKING:
    from keras_attn.export.translator import Translator
    from keras_attn.models.family import Family

# The beam-search options and the values `decoder="beam"` gives those not set.
BEAM_DEFAULTS = {"beam_size": 4, "length_penalty": 0.6}


@dataclass(frozen=True)
class ExportOptions:
    """The options of `keras_attn.export.cli.export_run` that shape the exported graph.

    Each defaults to "not given": `decoder="greedy"`, `jit_compile=False`, the others None.
    """

    max_output_length: int | None = None
    decoder: str = "greedy"
    beam_size: int | None = None
    length_penalty: float | None = None
    jit_compile: bool = False
    batch_buckets: Sequence[int] | None = None
    length_buckets: Sequence[int] | None = None

    def given(self) -> dict[str, Any]:
        """`{option: value}` of the options set to other than their defaults, in field order."""
        return {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if getattr(self, field.name) != field.default
        }

    def output_length(self, default: int) -> int:
        """`max_output_length`, or `default` when it is not given."""
        return default if self.max_output_length is None else self.max_output_length

    def beam(self) -> dict[str, Any]:
        """`beam_size` and `length_penalty`, their defaults filled in."""
        return {
            name: default if getattr(self, name) is None else getattr(self, name)
            for name, default in BEAM_DEFAULTS.items()
        }

    def compiled(self) -> dict[str, Any]:
        """`jit_compile`, `batch_buckets` and `length_buckets`."""
        return {
            "jit_compile": self.jit_compile,
            "batch_buckets": self.batch_buckets,
            "length_buckets": self.length_buckets,
        }


_NO_OPTIONS = ExportOptions()


@dataclass(frozen=True)
class Refusal:
    """Export options a kind does not take, and the one-line error naming those given.

    Args:
        options: the options refused.
        message: the error, formatted with `given` (the refused options given, comma-separated)
            and `model` (the run's model name).
        fields: the fields the error names before the refused options given.
        with_value: refused options named with their value in `given` (`decoder='beam'`).
    """

    options: tuple[str, ...]
    message: str
    fields: tuple[str, ...] = ()
    with_value: tuple[str, ...] = ()

    def check(self, options: ExportOptions, model: str) -> None:
        """Raise a `ConfigError` if one of `options` this refusal covers is given."""
        given = {name: value for name, value in options.given().items() if name in self.options}
        if given:
            named = [
                f"{name}={value!r}" if name in self.with_value else name
                for name, value in given.items()
            ]
            raise ConfigError(
                self.message.format(given=", ".join(named), model=model),
                list(dict.fromkeys([*self.fields, *given])),
            )


class ExportKind(abc.ABC):
    """How runs of one `Family.kind` are exported.

    A subclass sets `name`, `refusals` (the options its runs do not take) and `beam_search`
    (whether `decoder="beam"` and its options apply), and implements `write`.
    """

    name: str
    refusals: tuple[Refusal, ...] = ()
    beam_search: bool = False

    def check_options(self, options: ExportOptions, model: str) -> None:
        """Raise a `ConfigError` naming the options given that do not apply to a `model` run,
        or beam options without `decoder="beam"` for a kind decoded by beam search."""
        if self.beam_search:
            check_beam_options(options)
        for refusal in self.refusals:
            refusal.check(options, model)

    def export_run(
        self,
        run: RunDirectory,
        family: Family,
        model_base_path: str | Path,
        version: int | None,
        check: bool,
        options: ExportOptions,
    ) -> Path:
        """Export `run` (of `family`) as `model_base_path/version`; returns that directory.

        Args:
            run: a finished run of this kind.
            family: the run's `keras_attn.models.Family`.
            model_base_path: the model base directory.
            version: the version written (None: newest + 1).
            check: run the exported graph's contract check.
            options: the export options.

        Raises:
            ConfigError: an option that does not apply to this kind or to this run, or a model
                with non-finite weights, before anything is written.
        """
        self.check_options(options, run.read_config_fields()["model"])
        return self.write(run, family, model_base_path, version, check, options)

    @abc.abstractmethod
    def write(self, run, family, model_base_path, version, check, options) -> Path:
        """`export_run` once the options are known to apply."""


def check_beam_options(options: ExportOptions) -> None:
    """Raise a `ConfigError` for `beam_size` or `length_penalty` without `decoder="beam"`."""
    given = [name for name in BEAM_DEFAULTS if getattr(options, name) is not None]
    if options.decoder != "beam" and given:
        raise ConfigError(f"{', '.join(given)} only apply to decoder='beam'", ["decoder", *given])


class TranslatorKind(ExportKind):
    """A translator run as a `Translator` SavedModel (`export_translator`), greedy or beam
    search over the family's step view; sources keep the run's `max_length` tokens."""

    name = "translator"
    beam_search = True

    def write(self, run, family, model_base_path, version, check, options) -> Path:
        from keras_attn.export.saved_model import export_translator

        translator = run_translator(run, family, load_finite_model(run), options)
        return export_translator(translator, model_base_path, version=version, check=check)


def run_translator(
    run: RunDirectory, family: Family, model, options: ExportOptions = _NO_OPTIONS
) -> Translator:
    """The `Translator` of `model`, a translator run's model (as trained, or as loaded from
    `run`): the run's tokenizers, sources cut to the run's `max_length` tokens, decoded by the
    family's step view for `options.output_length(MAX_OUTPUT_LENGTH)` tokens, with the decoder,
    beam and compilation options of `options` (default: greedy, not compiled)."""
    from keras_attn.export.translator import Translator

    length = options.output_length(MAX_OUTPUT_LENGTH)
    return Translator(
        model,
        family.decoding_steps(model, length),
        *run.tokenizers(),
        max_source_length=run.read_config_fields()["max_length"],
        max_output_length=length,
        decoder=options.decoder,
        **options.beam(),
        **options.compiled(),
    )


class GeneratorKind(ExportKind):
    """A language-model run as a `Generator` SavedModel (`export_generator`): prompts cut to the
    run's `max_length` tokens, continuations of at most `max_output_length` tokens."""

    name = "generator"
    refusals = (
        Refusal(
            ("decoder", "beam_size", "length_penalty"),
            "{given}: no beam search for a {model} run; its generate signature decodes "
            "greedily, generate_with_options samples (temperature, top_k, top_p)",
            fields=("decoder",),
            with_value=("decoder",),
        ),
    )

    def write(self, run, family, model_base_path, version, check, options) -> Path:
        from keras_attn.export.generator import Generator
        from keras_attn.export.saved_model import export_generator

        config = run.read_config_fields()
        length = options.output_length(MAX_OUTPUT_LENGTH)
        model = load_finite_model(run)
        # A step view over learned positions says how many (`GPTSteps.positions`); a recurrent
        # one reads any length.
        positions = getattr(family.steps, "positions", None)
        positions = None if positions is None else positions(model)
        max_length = config["max_length"]
        room = None if positions is None else positions - 1 - max_length  # after START, prompt
        if room is not None and length > room:
            raise ConfigError(
                f"max_output_length={length} does not fit this {config['model']} run: its "
                f"{positions} positions leave {room} tokens after START and a "
                f"{max_length}-token prompt",
                ["max_output_length"],
            )
        generator = Generator(
            model,
            family.decoding_steps(model, max_length + 1 + length),
            run.tokenizer(),
            max_prompt_length=max_length,
            max_output_length=length,
            **options.compiled(),
        )
        return export_generator(generator, model_base_path, version=version, check=check)


class CaptionerKind(ExportKind):
    """An image-captioning run as a `Captioner` SavedModel (`export_captioner`: image bytes in,
    captions and attention maps out), greedy or beam search; `max_output_length` defaults to
    the longest caption of the scene grammar plus END."""

    name = "captioner"
    refusals = (
        Refusal(
            ("jit_compile", "batch_buckets", "length_buckets"),
            "no compiled export of a {model} run: jit_compile, batch_buckets and "
            "length_buckets apply to translators and gpt",
        ),
    )
    beam_search = True

    def write(self, run, family, model_base_path, version, check, options) -> Path:
        from keras_attn.export.captioner import MAX_CAPTION_TOKENS, Captioner, export_captioner

        length = options.output_length(MAX_CAPTION_TOKENS)
        model = load_finite_model(run)
        captioner = Captioner(
            model,
            family.decoding_steps(model, length),
            run.tokenizer(),
            max_output_length=length,
            decoder=options.decoder,
            **options.beam(),
        )
        return export_captioner(captioner, model_base_path, version=version, check=check)


# Every option of `ExportOptions`: a classifier or tagger takes none.
NOT_DECODED = Refusal(
    tuple(field.name for field in dataclasses.fields(ExportOptions)),
    "{given}: a classifier or tagger run is not decoded; its export has no decoding options",
)


class ClassifierKind(ExportKind):
    """A classifier or tagger run, exported by `export_classifier_run` (which picks the
    `Classifier` or `Tagger` module by the run's kind); it takes no decoding option."""

    refusals = (NOT_DECODED,)

    def __init__(self, name: str) -> None:
        self.name = name

    def write(self, run, family, model_base_path, version, check, options) -> Path:
        from keras_attn.export.classifier import export_classifier_run

        return export_classifier_run(run.path, model_base_path, version, check=check)


class AnswererKind(ExportKind):
    """A visual question answering run as an `Answerer` SavedModel (`export_answerer_run`:
    image bytes and a question in; the answer, its probabilities and the attention maps out);
    it takes no decoding option."""

    name = "answerer"
    refusals = (
        Refusal(
            tuple(field.name for field in dataclasses.fields(ExportOptions)),
            "{given}: a {model} run is not decoded; its export has no decoding options",
        ),
    )

    def write(self, run, family, model_base_path, version, check, options) -> Path:
        from keras_attn.export.answerer import export_answerer_run

        return export_answerer_run(run.path, model_base_path, version, check=check)


EXPORT_KINDS: dict[str, ExportKind] = {
    kind.name: kind
    for kind in (
        TranslatorKind(),
        GeneratorKind(),
        CaptionerKind(),
        ClassifierKind("classifier"),
        ClassifierKind("tagger"),
        AnswererKind(),
    )
}
