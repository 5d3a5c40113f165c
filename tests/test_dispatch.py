"""`keras_attn.training` and `keras_attn.export` reach a model family only through its kind and
task objects: no branch on a family's kind, task or name, no type check of its step view.

A new family of an existing kind then trains and exports with no change in either package.
Tables keyed by kind or task (`EXPORT_KINDS[family.kind]`, `get_task(family.task)`) are the
dispatch itself and pass; comparisons and type checks fail, listed as `file:line: code`. The
last tests register new families of each kind and check they get their kind's behaviour.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import textwrap
from pathlib import Path

import pytest

import keras_attn
from keras_attn.errors import ConfigError
from keras_attn.export.cli import export_run
from keras_attn.export.kinds import EXPORT_KINDS
from keras_attn.formats import CONFIG_FILE, MODEL_FILE
from keras_attn.models import TransformerTranslatorSteps
from keras_attn.models.families import BUILT_IN_FAMILIES, MODEL_FAMILIES, get_family
from keras_attn.models.family import EXPORTED_KINDS
from keras_attn.models.rnn.options import RNNLuongOptions
from keras_attn.options import option_field
from keras_attn.training.config import TrainConfig

ROOT = Path(keras_attn.__file__).parent
PACKAGES = ("training", "export")
# The attributes of a family that name what it is.
IDENTITY = ("kind", "task", "name", "language_model")
FAMILY_NAMES = frozenset(BUILT_IN_FAMILIES)


def _is_family(node: ast.expr) -> bool:
    """Whether `node` is a family: `family`, `self.family`, `run.family()`, `get_family(m)`."""
    if isinstance(node, ast.Call):
        node = node.func
    return "family" in _named(node).lower()


def _identity(node: ast.expr) -> bool:
    """`family.kind`, `family.task`, `family.name` or `family.language_model`."""
    return isinstance(node, ast.Attribute) and node.attr in IDENTITY and _is_family(node.value)


def _named(node: ast.expr) -> str:
    """The name of a variable or attribute node; "" for another node."""
    return getattr(node, "attr", None) or getattr(node, "id", "")


def _strings(node: ast.expr) -> list[str]:
    """The string constants of `node`: itself, or the elements of a tuple, list or set."""
    elements = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def _steps_class(node: ast.expr) -> bool:
    """Whether `node` names a step-view class (`RNNTranslatorSteps`, `(A, BSteps)`, ...)."""
    return any(_named(sub).endswith("Steps") for sub in ast.walk(node))


def violations(source: str) -> list[tuple[int, str]]:
    """`(line, reason)` of each branch on a family's identity in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_identity(operand) for operand in operands):
                found.append((node.lineno, "compares a family's kind, task or name"))
            names = sorted({s for o in operands for s in _strings(o)} & FAMILY_NAMES)
            backbone = any(_named(o) == "backbone" for o in operands)
            if names and not backbone:  # a backbone is an architecture, not the family's name
                found.append((node.lineno, f"compares with the family name {names[0]!r}"))
        elif isinstance(node, ast.Attribute) and node.attr == "language_model":
            if _is_family(node.value):
                found.append((node.lineno, "reads .language_model"))
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in (
            "isinstance",
            "issubclass",
        ):
            if len(node.args) == 2 and _steps_class(node.args[1]):
                found.append((node.lineno, f"{node.func.id}(..., a Steps class)"))
        elif isinstance(node, (ast.If, ast.IfExp, ast.While)):
            if _identity(node.test):
                found.append((node.lineno, "tests a family's kind, task or name"))
    return sorted(set(found))


def test_training_and_export_dispatch_through_kind_objects():
    lines = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            code = source.splitlines()
            for line, reason in violations(source):
                where = path.relative_to(ROOT.parent)
                lines.append(f"{where}:{line}: {reason}: {code[line - 1].strip()}")
    assert not lines, "branches on a family's identity:\n" + "\n".join(lines)


@pytest.mark.parametrize(
    "code, reason",
    [
        ('if family.kind in ("classifier", "tagger"):\n    pass', "kind, task or name"),
        ('x = a if family.task == "captioning" else b', "kind, task or name"),
        ("ok = run.family().kind != 'translator'", "kind, task or name"),
        ("if self.family.name:\n    pass", "kind, task or name"),
        ("if family.language_model:\n    pass", ".language_model"),
        ("generator = get_family(name).language_model", ".language_model"),
        ("issubclass(family.steps, RNNTranslatorSteps)", "a Steps class"),
        ("isinstance(steps, (models.GPTSteps, int))", "a Steps class"),
        ('if config["model"] == "gpt":\n    pass', "family name 'gpt'"),
        ('if model in ("rnn-plain", "show-attend-tell"):\n    pass', "family name 'rnn-plain'"),
    ],
)
def test_each_kind_of_branch_is_found(code, reason):
    found = violations(textwrap.dedent(code))
    assert any(reason in why for _, why in found), found


@pytest.mark.parametrize(
    "code",
    [
        "kind = EXPORT_KINDS[family.kind]",
        "task = get_task(family.task)",
        "module = RUN_MODULES.get(family.kind)",
        'if device.kind == "TPU":\n    pass',
        'first = CLS if family.backbone == "bert" else START',
        'if backbone in ("bart", "gpt"):\n    pass',
        "axis = 'T' if self.language_model else 'T_y'",
        'message = f"a {family.task} model, not model={model!r}"',
        "names = family.option_names or ()",
        "if getattr(family.steps, 'supports_scheduled_sampling', False):\n    pass",
        "isinstance(module, Tagger)",
    ],
)
def test_tables_and_other_attributes_pass(code):
    assert violations(textwrap.dedent(code)) == []


# --- new families of the built-in kinds ----------------------------------------------------


@pytest.fixture
def family_like(monkeypatch):
    """Registers a copy of a built-in family under a new name (undone after the test)."""

    def register(name: str, built_in: str, **changes):
        family = dataclasses.replace(get_family(built_in), name=name, **changes)
        monkeypatch.setitem(MODEL_FAMILIES, name, family)
        return family

    return register


def refused_export(tmp_path, model: str, **options) -> ConfigError:
    """The error `export_run` raises for a run of `model` (its model file is never read)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / CONFIG_FILE).write_text(json.dumps({"model": model, "max_length": 20}))
    (run / MODEL_FILE).write_bytes(b"")
    with pytest.raises(ConfigError) as error:
        export_run(run, tmp_path / "models", **options)
    assert not (tmp_path / "models").exists()
    return error.value


def test_every_exported_kind_has_an_export_kind():
    assert sorted(EXPORT_KINDS) == sorted(EXPORTED_KINDS)
    assert all(kind.name == name for name, kind in EXPORT_KINDS.items())


NOT_DECODED = "a classifier or tagger run is not decoded; its export has no decoding options"


@pytest.mark.parametrize(
    "built_in, options, message, fields",
    [
        ("transformer", {"beam_size": 3}, "beam_size only apply to decoder='beam'",
         ("decoder", "beam_size")),
        ("gpt", {"decoder": "beam", "length_penalty": 1.0},
         "decoder='beam', length_penalty: no beam search for a my-family run; its generate "
         "signature decodes greedily, generate_with_options samples (temperature, top_k, top_p)",
         ("decoder", "length_penalty")),
        ("show-attend-tell", {"jit_compile": True, "length_buckets": (8,)},
         "no compiled export of a my-family run: jit_compile, batch_buckets and length_buckets "
         "apply to translators and gpt", ("jit_compile", "length_buckets")),
        ("show-attend-tell", {"length_penalty": 1.0}, "length_penalty only apply to "
         "decoder='beam'", ("decoder", "length_penalty")),
        ("bert-classifier", {"max_output_length": 5, "decoder": "beam"},
         f"max_output_length, decoder: {NOT_DECODED}", ("max_output_length", "decoder")),
        ("bert-tagger", {"jit_compile": True, "batch_buckets": (1, 2)},
         f"jit_compile, batch_buckets: {NOT_DECODED}", ("jit_compile", "batch_buckets")),
        ("vqa-coattention", {"max_output_length": 5, "beam_size": 2},
         "max_output_length, beam_size: a my-family run is not decoded; its export has no "
         "decoding options", ("max_output_length", "beam_size")),
    ],
)  # fmt: skip
def test_a_new_family_gets_its_kinds_option_table(
    tmp_path, family_like, built_in, options, message, fields
):
    family_like("my-family", built_in)
    error = refused_export(tmp_path, "my-family", **options)
    assert str(error) == message
    assert error.fields == fields


@pytest.mark.parametrize(
    "built_in, changes", [("bert", {}), ("bart", {}), ("transformer", {"steps": None})]
)
def test_a_new_family_of_no_exported_kind_is_refused_in_one_line(
    tmp_path, family_like, built_in, changes
):
    family_like("my-family", built_in, **changes)
    error = refused_export(tmp_path, "my-family")
    assert str(error).startswith("a my-family run is not exported: keras-attn export writes ")
    assert error.fields == ("run_path",)


def test_a_family_declares_its_attentions(family_like):
    family_like("my-captioner", "show-attend-tell")
    TrainConfig(model="my-captioner", options={"attention": "hard"}).validate()
    with pytest.raises(ConfigError) as error:
        TrainConfig(model="my-captioner", options={"attention": "local-m"}).validate()
    assert str(error.value) == "attention must be one of soft, hard, got 'local-m'"

    @dataclasses.dataclass(frozen=True)
    class GlobalOnly(RNNLuongOptions):
        attention: str = option_field("global", "global only", choices=("global",))

    family_like("my-luong", "rnn-luong", options=GlobalOnly)
    TrainConfig(model="my-luong", options={"attention": "global"}).validate()
    with pytest.raises(ConfigError, match="attention must be one of global, got 'local-p'"):
        TrainConfig(model="my-luong", options={"attention": "local-p"}).validate()


class SampledTransformerSteps(TransformerTranslatorSteps):
    supports_scheduled_sampling = True


def test_the_step_view_declares_scheduled_sampling(family_like):
    from keras_attn.training.scheduled_sampling import supports_scheduled_sampling

    assert supports_scheduled_sampling(get_family("rnn-luong"))
    assert not supports_scheduled_sampling(get_family("show-attend-tell"))  # a function
    family_like("my-rnn", "rnn-attention")
    TrainConfig(model="my-rnn", scheduled_sampling="linear").validate()
    family_like("my-transformer", "transformer", steps=SampledTransformerSteps)
    TrainConfig(model="my-transformer", scheduled_sampling="linear").validate()
    with pytest.raises(ConfigError, match="applies to the RNN translators") as error:
        TrainConfig(model="transformer", scheduled_sampling="linear").validate()
    assert error.value.fields == ("scheduled_sampling", "model")


def test_task_options_follow_the_task(family_like):
    family_like("my-classifier", "text-cnn")
    TrainConfig(model="my-classifier", examples_per_class=4).validate()
    with pytest.raises(ConfigError) as error:
        TrainConfig(model="my-classifier", mask_rate=0.2).validate()
    assert str(error.value) == (
        "mask_rate does not apply to model='my-classifier' (a classification model)"
    )
    assert error.value.fields == ("mask_rate", "model")
