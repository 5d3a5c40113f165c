"""The user documentation: its examples run, the names and links it quotes exist, LICENSE."""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
USER_DOCS = sorted(
    [
        README,
        ROOT / "benchmarks" / "README.md",
        ROOT / "serving" / "README.md",
        ROOT / "experiments" / "README.md",
    ]
    + list((ROOT / "docs").glob("*.md"))
    + list((ROOT / "examples").glob("README*.md"))
)
ATTENTION_PAGE = ROOT / "docs" / "attention.md"
# A file or folder of the repository quoted in a code span, e.g. `keras_attn/serving/limits.py`.
REPOSITORY_PATH = re.compile(
    r"`((?:keras_attn|tests|examples|benchmarks|experiments|serving)/[\w/.\-]+)`"
)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"```[a-z]*\n(.*?)```|`([^`\n]+)`", re.DOTALL)
# A dotted name of the package (`keras_attn.models.families.get_family`) or an attribute of one of
# its public classes (`LocalAttention.window_weights`).
PACKAGE_NAME = re.compile(r"\bkeras_attn(?:\.\w+)+")
CLASS_ATTRIBUTE = re.compile(r"(?<![\w.])([A-Z]\w+)\.([a-z_]\w*)")
# Words that speak of how the work was organised rather than of the library (a TF
# `Session::Run` and a random `seed=` are fine).
ORGANISATIONAL = re.compile(
    r"\bthesis\b|\bslides?\b|\bdecks?\b|\bseed 0\d\d\b|\bseed documents?\b|\bsessions?\b"
    r"|\bissues?\b|\bCEO\b|\bhelpers?\b",
    re.IGNORECASE,
)
# An absolute path of one machine (a home, scratch or temporary folder, a Windows drive): a user who
# copies it gets a path that does not exist on theirs. Paths every install has (`/usr/share/...`),
# container paths (`/models/translator` in the docker and Kubernetes recipes) and placeholders
# (`/bad/dir`) are not of one machine; `$PWD/...` and `~/...` are the user's.
MACHINE_PATH = re.compile(
    r"(?<![\w.~$/-])/(?:work|tmp|root|home|Users|var/folders|private/var)/|(?<![\w])[A-Za-z]:\\"
)
# The languages of fenced blocks that hold shell commands (a bare fence included).
SHELL_LANGUAGES = {"", "bash", "console", "sh", "shell"}


def _readme_python_block() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    assert blocks, "README.md has no python example"
    return blocks[0]


def _python_blocks(markdown: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown.read_text(encoding="utf-8"), re.DOTALL)


def _run_python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
        check=False,
    )


def _resolves(dotted: str) -> bool:
    """Whether `a.b.c` names a module of the package or an attribute reached from one."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def _shell_blocks(markdown: Path) -> list[str]:
    """The bodies of the page's fenced shell blocks (fences may be indented, as in a list)."""
    blocks, language, body = [], None, []
    for line in markdown.read_text(encoding="utf-8").splitlines():
        fence = line.strip()
        if language is None and fence.startswith("```"):
            language, body = fence[3:].strip(), []
        elif language is not None and fence == "```":
            if language in SHELL_LANGUAGES:
                blocks.append("\n".join(body))
            language = None
        elif language is not None:
            body.append(line)
    return blocks


def _keras_attn_commands(markdown: Path) -> list[str]:
    """The `keras-attn ...` command lines of the page's shell blocks: after an optional `$ `
    prompt and `NAME=value` assignments, a trailing `\\` joining lines, comments and `&` removed."""
    commands = []
    for block in _shell_blocks(markdown):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            words = line.strip().removeprefix("$ ").split()
            while words and re.match(r"[A-Z_]+=", words[0]):
                words.pop(0)
            # `keras-attn train: error: ...` is what the command prints, not a command.
            if words[:1] == ["keras-attn"] and len(words) > 1 and not words[1].endswith(":"):
                commands.append(re.sub(r"\s+#.*$", "", " ".join(words)).rstrip(" &"))
    return commands


def _anchors(markdown: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    anchors = set()
    for heading in re.findall(r"^#+\s+(.*)$", markdown.read_text(encoding="utf-8"), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


def test_readme_is_short_and_stays_inside_the_repository():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 120
    assert "../" not in text
    assert "make demo" in text and "make test" in text


def test_readme_example_runs_and_prints_what_the_readme_says():
    result = _run_python(_readme_python_block())
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == ["(1, 3, 1000)", "[[1. 1. 1.]] True"]
    readme = README.read_text(encoding="utf-8")
    assert "`(1, 3, 1000)`" in readme and "`[[1. 1. 1.]] True`" in readme


@pytest.mark.parametrize("markdown", USER_DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_resolve(markdown: Path):
    broken = []
    for target in LINK.findall(markdown.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (markdown.parent / path_part).resolve() if path_part else markdown
        if not resolved.exists() or ROOT not in (resolved, *resolved.parents):
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(target)
    assert not broken, f"{markdown.relative_to(ROOT)}: links that do not resolve: {broken}"


@pytest.mark.parametrize("markdown", USER_DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_repository_paths_named_in_code_spans_exist(markdown: Path):
    named = re.findall(REPOSITORY_PATH, markdown.read_text(encoding="utf-8"))
    missing = sorted({path for path in named if not (ROOT / path).exists()})
    assert not missing, f"{markdown.relative_to(ROOT)} names files that do not exist: {missing}"


def test_attention_page_example_runs_and_prints_what_the_page_says():
    blocks = _python_blocks(ATTENTION_PAGE)
    assert len(blocks) == 1, "docs/attention.md should have one python example"
    result = _run_python(blocks[0])
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == ["(2, 5, 8) (2, 5, 5) 0.0"]
    assert "`(2, 5, 8) (2, 5, 5) 0.0`" in ATTENTION_PAGE.read_text(encoding="utf-8")


@pytest.mark.parametrize("markdown", USER_DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_names_of_the_package_in_code_exist(markdown: Path):
    namespaces = [
        importlib.import_module(f"keras_attn.{name}")
        for name in ("layers", "models", "scores", "distributions")
    ]
    missing = set()
    for block, span in CODE.findall(markdown.read_text(encoding="utf-8")):
        code = block or span
        missing.update(name for name in PACKAGE_NAME.findall(code) if not _resolves(name))
        for owner, attribute in CLASS_ATTRIBUTE.findall(code):
            holders = [getattr(space, owner) for space in namespaces if hasattr(space, owner)]
            if holders and not any(hasattr(holder, attribute) for holder in holders):
                missing.add(f"{owner}.{attribute}")
    assert not missing, f"{markdown.relative_to(ROOT)}: not in keras_attn: {sorted(missing)}"


@pytest.mark.parametrize("markdown", USER_DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_docs_speak_to_users(markdown: Path):
    text = markdown.read_text(encoding="utf-8").replace("Session::Run", "")
    found = [
        f"line {text.count(chr(10), 0, match.start()) + 1}: {match.group(0)!r}"
        for match in ORGANISATIONAL.finditer(text)
    ]
    assert not found, f"{markdown.relative_to(ROOT)}: {found}"


@pytest.mark.parametrize("markdown", USER_DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_docs_hold_no_paths_of_one_machine(markdown: Path):
    text = markdown.read_text(encoding="utf-8")
    found = [
        f"line {text.count(chr(10), 0, match.start()) + 1}: "
        f"{text[match.start() : text.find(chr(10), match.start())][:80]!r}"
        for match in MACHINE_PATH.finditer(text)
    ]
    assert not found, f"{markdown.relative_to(ROOT)} names paths of one machine: {found}"


def test_keras_attn_commands_in_the_docs_parse():
    """Every `keras-attn` command a page shows is accepted by the real command line (its
    subcommand, flags and choices); commands with `...` or `[optional]` parts are sketches."""
    from keras_attn.cli import build_parser

    parser = build_parser()
    checked, refused = 0, []
    for markdown in USER_DOCS:
        for command in _keras_attn_commands(markdown):
            if "..." in command or "[" in command:
                continue
            checked += 1
            errors = io.StringIO()
            try:
                with contextlib.redirect_stderr(errors):
                    args = parser.parse_args(shlex.split(command)[1:])
            except SystemExit:
                message = errors.getvalue().strip().splitlines()[-1]
                refused.append(f"{markdown.relative_to(ROOT)}: {command!r}: {message}")
                continue
            if getattr(args, "refused", None) is not None:  # another family's option flag
                refused.append(f"{markdown.relative_to(ROOT)}: {command!r}: {args.refused}")
    assert checked >= 20, f"only {checked} commands found: is the block pattern still right?"
    assert not refused, "\n".join(refused)


@pytest.mark.parametrize("markdown", USER_DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_serve_and_translate_commands_name_the_model(markdown: Path):
    """`keras-attn serve` (one model) and `keras-attn translate` default to different names than a
    reader might expect, so every command in the docs names the model it serves or queries."""
    unnamed = [
        command
        for command in _keras_attn_commands(markdown)
        if (command.startswith("keras-attn translate ") or command.startswith("keras-attn serve "))
        and "--model_config_file" not in command
        and "--model_name" not in command
    ]
    assert not unnamed, f"{markdown.relative_to(ROOT)}: commands without --model_name: {unnamed}"


def test_license_is_the_apache_2_text():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.lstrip().startswith("Apache License")
    assert "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert "Copyright 2026 The keras_attn Authors" in text
    assert "license = Apache-2.0" in (ROOT / "setup.cfg").read_text(encoding="utf-8")
