"""The text heatmap of `keras-attn translate --alignment`."""

import numpy as np
import pytest

from keras_attn.serving.heatmap import SHADES, shade, text_heatmap


@pytest.mark.parametrize(
    "weight, expected",
    [(0.0, "·"), (0.19, "·"), (0.2, "░"), (0.39, "░"), (0.41, "▒"), (0.6, "▓"), (0.8, "█"),
     (1.0, "█"), (-0.1, "·"), (1.5, "█"), (float("nan"), "·")],
)  # fmt: skip
def test_shades_are_bins_of_a_fifth(weight, expected):
    assert shade(weight) == expected


def test_every_cell_is_the_shade_of_its_weight_under_its_source_token():
    rng = np.random.default_rng(0)
    source, target = ["¿", "dónde", "está", "el", "gato", "?"], ["where", "is", "the", "cat", "?"]
    weights = rng.dirichlet(np.ones(len(source)), size=len(target))
    lines = text_heatmap(source, target, weights).split("\n")
    assert lines[0] == "      ¿ dónde está el gato ?"
    starts = [lines[0].index(f" {token}") + 1 for token in source]  # each column's first character
    for i, line in enumerate(lines[1:]):
        assert line.startswith(target[i].ljust(5) + " ")
        cells = [line[start] if start < len(line) else " " for start in starts]
        assert cells == [shade(w) for w in weights[i]]
        assert set(line[6:]) <= set(SHADES) | {" "}


def test_padding_tokens_are_left_out():
    weights = np.zeros((4, 3))
    weights[0, 1] = weights[1, 0] = 1.0
    found = text_heatmap(["a", "bb", ""], ["x", "yy", "", ""], weights)
    assert found == "   a bb\nx  · █\nyy █ ·"


def test_an_alignment_smaller_than_the_tokens_is_refused():
    with pytest.raises(ValueError, match=r"covering 2 target and 2 source tokens.*\(2, 1\)"):
        text_heatmap(["a", "b"], ["x", "y"], np.ones((2, 1)))
    with pytest.raises(ValueError, match="shape \\(3,\\)"):
        text_heatmap(["a"], ["x"], np.ones(3))
