"""`ConfigError.in_terms_of` writes the fields a message names as the command line's flags."""

from keras_attn.errors import ConfigError


def as_flag(name):
    return "--" + name.replace("_", "-")


def test_fields_and_their_values_become_flags():
    error = ConfigError("d_model=30 is not divisible by num_heads=4.", ["d_model", "num_heads"])
    assert error.in_terms_of(as_flag) == "--d-model 30 is not divisible by --num-heads 4."


def test_a_quoted_value_loses_its_quotes_and_a_bare_name_becomes_the_flag():
    error = ConfigError("out='runs/a' exists; choose another out", ["out"])
    assert error.in_terms_of(as_flag) == "--out runs/a exists; choose another --out"


def test_a_field_name_inside_a_path_or_a_longer_name_is_left_alone():
    message = "runs/out/1 and ./out and out-of-date and layout and steps_out stay; out goes"
    error = ConfigError(message, ["out"])
    assert error.in_terms_of(as_flag) == message.replace("; out goes", "; --out goes")


def test_a_field_without_a_flag_stays_as_written():
    error = ConfigError("steps=0 must be positive", ["steps"])
    assert error.in_terms_of(lambda name: None) == "steps=0 must be positive"
