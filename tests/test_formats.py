"""A run directory whose `config.json` is not one is a user's mistake: one line, exit status 2."""

import os

import pytest

from keras_attn.cli import main as cli
from keras_attn.errors import UserError
from keras_attn.formats import RunDirectory


@pytest.mark.parametrize("text", ["{oops", "[1, 2]", "\udcff"])
def test_a_config_that_is_not_a_json_object_is_a_user_error(tmp_path, text):
    (tmp_path / "config.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(UserError, match=r"config\.json is not a run's config\.json"):
        RunDirectory(tmp_path).read_config_fields()


@pytest.mark.parametrize(
    "argv", [["train", "--resume", "--out"], ["export", "--model_base_path", "models"]]
)
def test_the_cli_reports_a_corrupt_config_in_one_line(tmp_path, capsys, argv):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{oops")
    (run / "model.keras").write_bytes(b"")
    argv = [*argv, str(run)] if argv[0] == "train" else [argv[0], str(run), *argv[1:]]
    assert cli(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "is not a run's config.json" in lines[0], lines


def test_an_export_description_is_read_when_it_is_an_object(tmp_path):
    from keras_attn.formats import export_description_path, read_export_description

    assert read_export_description(tmp_path) is None  # none written
    path = export_description_path(tmp_path)
    os.makedirs(os.path.dirname(path))
    for text, expected in [
        ('{"decoder": "beam", "beam_size": 4}', {"decoder": "beam", "beam_size": 4}),
        ("[1, 2]", None),
        ("{not json", None),
    ]:
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
        assert read_export_description(tmp_path) == expected
