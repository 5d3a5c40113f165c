import dataclasses

import keras
import pytest

from keras_attn.export.translator import Translator
from keras_attn.formats import CONFIG_FILE, LABELS, MODEL_FILE, RunDirectory
from keras_attn.models import RNNTranslatorSteps, rnn_attention_translator
from keras_attn.text.synthetic import generate_pairs
from keras_attn.text.tokenizer import WordPieceTokenizer
from keras_attn.text.vocab import build_wordpiece_vocab
from keras_attn.vision.questions import ANSWERS


@pytest.fixture(scope="session")
def tiny_pairs():
    return generate_pairs(400, seed=3)


@pytest.fixture(scope="session")
def vocabularies(tiny_pairs):
    return (
        build_wordpiece_vocab([s for s, _ in tiny_pairs], 300),
        build_wordpiece_vocab([t for _, t in tiny_pairs], 300),
    )


def tiny_translator(vocabularies, **kwargs):
    """An untrained tiny translator over `vocabularies` (source, target); keyword arguments go to
    `Translator` (e.g. the decoder)."""
    source, target = (WordPieceTokenizer(vocab) for vocab in vocabularies)
    model = rnn_attention_translator(
        source.vocab_size, target.vocab_size, embedding_dim=8, units=16, dropout=0.0
    )
    return Translator(
        model, RNNTranslatorSteps(model), source, target, max_output_length=12, **kwargs
    )


@pytest.fixture
def make_translator(vocabularies):
    """An untrained tiny translator; keyword arguments go to `Translator` (e.g. the decoder)."""

    def make(**kwargs):
        return tiny_translator(vocabularies, **kwargs)

    return make


# Built once per session: each traces its decoding functions on first use (about a CPU second),
# then every test that translates or exports with it reuses them; no test changes them. A test
# that needs a translator of its own builds one with `make_translator`.
@pytest.fixture(scope="session")
def translator(vocabularies):
    return tiny_translator(vocabularies)


@pytest.fixture(scope="session")
def beam_translator(vocabularies):
    return tiny_translator(vocabularies, decoder="beam", beam_size=3, length_penalty=0.6)


# --- tiny run directories: what `keras-attn train` writes, without training ------------------

# The options of a tiny model, each given to the families that take it.
TINY_OPTIONS = {
    "embedding_dim": 8, "units": 16, "num_layers": 1, "d_model": 16, "num_heads": 2,
    "ff_dim": 32, "decoder_layers": 1, "dropout": 0.0,
}  # fmt: skip
# A tiny run's vocabularies: the family's reserved tokens, then these words (one id each).
RUN_WORDS = (
    "the a is and of to in that there will be this my was what girl village friends door lion "
    "park grandmother hat milk room color ducks el la de que y en una un los las es del ? ¿ . ,"
).split()
# A classifier run's class names (a tagger's tag names).
RUN_LABELS = ("animal", "thing", "other")
RUN_MAX_LENGTH = 16
RUN_IMAGE_SIZE = 32  # a captioner's `scenes-32` corpus: 32-pixel images, 4x4 regions
# The kinds trained on the scenes corpus.
IMAGE_KINDS = ("captioner", "answerer")


def write_tiny_run(path, model, seed=0, **options):
    """Write the run directory `keras-attn train --model MODEL` writes, untrained.

    `config.json` holds the `TrainConfig` fields (`options` may set fields too, e.g.
    `max_length`), the family's options (those of `TINY_OPTIONS` it takes, then those of
    `options`, the others at their defaults) and the float32 policy; the
    task's vocabulary files hold the family's reserved tokens and `RUN_WORDS`; a classifier or
    tagger has `labels.txt` (`RUN_LABELS`), an answerer its answers (`ANSWERS`); `model.keras`
    is built by the family's task from them with the weights of `seed`. Returns the
    `RunDirectory`."""
    from keras_attn.models.families import get_family
    from keras_attn.text.vocab import save_vocab
    from keras_attn.training.tasks import get_task
    from keras_attn.training.trainer import PRECISION_KEY, TrainConfig

    family = get_family(model)
    fields = {
        "model": model, "seed": seed, "max_length": RUN_MAX_LENGTH,
        "corpus": f"scenes-{RUN_IMAGE_SIZE}" if family.kind in IMAGE_KINDS else "synthetic",
        "vocab_size": len(RUN_WORDS) + 8, "mixed_precision": "float32",
    }  # fmt: skip
    hyperparameters = {k: v for k, v in TINY_OPTIONS.items() if k in family.option_names}
    for name, value in options.items():
        if name in family.option_names:
            hyperparameters[name] = value
        else:
            fields[name] = value
    config = TrainConfig(**fields, options=family.option_values(hyperparameters))
    config.validate(family)
    run = RunDirectory(path)
    run.path.mkdir(parents=True)
    run.write_json(CONFIG_FILE, {**dataclasses.asdict(config), PRECISION_KEY: "float32"})
    task = get_task(family.task)
    for name, reserved in task.vocabularies(config, family).items():
        save_vocab(run.file(name), [*reserved, *RUN_WORDS])
    if family.kind in ("classifier", "tagger"):
        run.write_text(LABELS, "".join(f"{label}\n" for label in RUN_LABELS))
    if family.kind == "answerer":
        run.write_text(LABELS, "".join(f"{answer}\n" for answer in ANSWERS))
    keras.utils.set_random_seed(seed)
    task.build_model(run, config, family).save(run.file(MODEL_FILE))
    return run


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """`tiny_run(model, **options)`: the `write_tiny_run` run directory of `model`, written once
    per session for each model and options."""
    runs = {}

    def make(model, **options):
        key = (model, *sorted(options.items()))
        if key not in runs:
            path = tmp_path_factory.mktemp("tiny_run") / model
            runs[key] = write_tiny_run(path, model, **options)
        return runs[key]

    return make
