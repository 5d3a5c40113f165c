"""`keras_attn.options`: an option's range and choices in its field metadata, checked."""

import math

import pytest

from keras_attn.errors import ConfigError
from keras_attn.options import FLOAT32_MAX, check_option, describe_range, option_kind


@pytest.mark.parametrize(
    "kind, metadata, words",
    [
        (int, {"above": 0}, "positive"),
        (float, {"above": 0}, "a positive finite number"),
        (int, {"min": 2}, ">= 2"),
        (float, {"min": 0.0}, "a finite number >= 0"),
        (float, {"above": 0.5}, "a finite number > 0.5"),
        (int, {"max": 9}, "<= 9"),
        (float, {"min": 0.0, "below": 1.0}, "in [0, 1)"),
        (float, {"above": 0, "below": 1}, "in (0, 1)"),
        (float, {"above": 0, "max": 1}, "in (0, 1]"),
        (int, {"min": 0, "max": 2**32 - 1}, "between 0 and 4294967295"),
        (str, {"help": "no range"}, None),
    ],
)
def test_the_range_in_words(kind, metadata, words):
    assert describe_range(kind, metadata) == words


@pytest.mark.parametrize(
    "value, kind, metadata, message",
    [
        (0, int, {"above": 0}, "x must be positive, got 0"),
        (1, int, {"min": 2}, "x must be >= 2, got 1"),
        (1.0, float, {"min": 0, "below": 1}, "x must be in [0, 1), got 1.0"),
        (-0.0001, float, {"min": 0, "below": 1}, "x must be in [0, 1), got -0.0001"),
        (math.nan, float, {"min": 0, "below": 1}, "x must be in [0, 1), got nan"),
        (math.inf, float, {"above": 0}, "x must be a positive finite number, got inf"),
        (math.nan, float, {}, "x must be a finite number, got nan"),
        (2**32, int, {"min": 0, "max": 2**32 - 1}, "x must be between 0 and 4294967295, got"),
        (1e39, float, {"above": 0, "float32": True}, "x must be at most 3.403e+38 (the largest"),
        ("c", str, {"choices": ("a", "b")}, "x must be one of a, b, got 'c'"),
        (True, int, {}, "x must be a int, got True"),
        (2.5, int, {}, "x must be a int, got 2.5"),
        ("1", float, {}, "x must be a float, got '1'"),
    ],
)
def test_a_value_out_of_its_range_or_choices_is_a_config_error_naming_it(
    value, kind, metadata, message
):
    with pytest.raises(ConfigError) as caught:
        check_option("x", value, kind, metadata)
    assert str(caught.value).startswith(message)
    assert caught.value.fields == ("x",)


def test_values_in_range_pass_and_an_int_is_a_float():
    assert check_option("x", 0.0, float, {"min": 0, "below": 1}) == 0.0
    assert check_option("x", 2**32 - 1, int, {"min": 0, "max": 2**32 - 1}) == 2**32 - 1
    assert check_option("x", FLOAT32_MAX, float, {"above": 0, "float32": True}) == FLOAT32_MAX
    value = check_option("x", 3, float, {"above": 0})
    assert value == 3.0 and isinstance(value, float)
    assert check_option("x", None, int, {"above": 0}) is None


def test_option_kind_takes_one_flag_type_or_none():
    assert option_kind(int) is int
    assert option_kind(float | None) is float
    assert option_kind(dict | None) is None
    assert option_kind(int | str) is None
