"""keras_attn.vision.grounding: nouns matched to scene objects, attention mass on their regions."""

import numpy as np
import pytest

from keras_attn.vision import (
    NounAttention,
    noun_objects,
    object_attention,
    summarize_object_attention,
)
from keras_attn.vision.scenes import SHAPES, SceneObject, generate_scene, shape_mask

SIZE = 64


def _object(shape, colour, size, center, radius):
    mask = shape_mask(shape, center, radius, SIZE)
    rows, cols = np.nonzero(mask)
    box = (rows.min(), cols.min(), rows.max() + 1, cols.max() + 1)
    return SceneObject(shape, colour, size, center, radius, mask, box)


# Left to right: two small red circles, a large blue square.
OBJECTS = (
    _object("circle", "red", "small", (12.0, 10.0), 6.0),
    _object("circle", "red", "small", (50.0, 30.0), 6.0),
    _object("square", "blue", "large", (30.0, 50.0), 10.0),
)


def test_nouns_are_matched_left_to_right_by_attributes_then_shape():
    words = (
        "a small red circle above a small red circle and a large blue square and a small green "
        "triangle"
    ).split()
    assert noun_objects(words, OBJECTS) == [
        (3, ("small", "red", "circle"), 0),
        (8, ("small", "red", "circle"), 1),
        (13, ("large", "blue", "square"), 2),
        (18, ("small", "green", "triangle"), None),  # no triangle in the scene
    ]
    # A wrong colour still points at the square; a third circle finds no circle left.
    words = "a large red square and a small red circle and a large red circle circle".split()
    assert [match for _, _, match in noun_objects(words, OBJECTS)] == [2, 0, 1, None]
    # The object sharing more attributes wins over the leftmost one.
    two = (OBJECTS[0], _object("circle", "blue", "large", (40.0, 40.0), 11.0))
    assert noun_objects("a large blue circle".split(), two) == [(3, ("large", "blue", "circle"), 1)]
    # Incomplete phrases keep what they name.
    assert noun_objects("circle red square".split(), OBJECTS) == [
        (0, (None, None, "circle"), 0), (2, (None, "red", "square"), 2),
    ]  # fmt: skip


def _region_reference(mask, grid):
    """Cells of a `grid` that the mask touches, by looping over the cells."""
    height, width = mask.shape[0] // grid[0], mask.shape[1] // grid[1]
    region = np.zeros(grid, bool)
    for row in range(grid[0]):
        for col in range(grid[1]):
            cell = mask[row * height : (row + 1) * height, col * width : (col + 1) * width]
            region[row, col] = cell.any()
    return region


@pytest.mark.parametrize("grid", [(8, 8), (4, 4), (16, 8)])
def test_object_attention_is_the_mass_inside_the_touched_cells(grid):
    words = "a small red circle above a small red circle and a large blue square".split()
    rng = np.random.default_rng(3)
    attention = rng.random((len(words) + 2, *grid))
    attention /= attention.sum(axis=(1, 2), keepdims=True)
    records = object_attention(words, attention, OBJECTS)
    assert [(r.position, r.object, r.exact) for r in records] == [
        (3, 0, True), (8, 1, True), (13, 2, True),
    ]  # fmt: skip
    for record in records:
        region = _region_reference(OBJECTS[record.object].mask, grid)
        assert record.share == pytest.approx(attention[record.position][region].sum(), abs=1e-12)
        assert record.uniform == pytest.approx(region.sum() / (grid[0] * grid[1]), abs=1e-12)
        # The phrase's words "a", size, colour and the noun: rows position - 3 .. position.
        expected = [
            attention[t][region].sum() for t in range(record.position - 3, record.position + 1)
        ]
        assert record.phrase_shares == pytest.approx(expected, abs=1e-12)
    # A noun at the caption's start has no earlier phrase words.
    first = object_attention(["square"], attention, OBJECTS)[0]
    assert first.phrase_shares[:3] == (None, None, None) and first.phrase_shares[3] == first.share
    # A map on the object's cells only puts all its mass inside; a uniform one the uniform share.
    region = _region_reference(OBJECTS[2].mask, grid)
    attention[13] = region / region.sum()
    attention[3] = 1.0 / (grid[0] * grid[1])
    records = object_attention(words, attention, OBJECTS)
    assert records[2].share == pytest.approx(1.0)
    assert records[0].share == pytest.approx(records[0].uniform)


def test_object_attention_on_generated_scenes_and_hard_one_hot_maps():
    rng = np.random.default_rng(0)
    for _ in range(5):
        scene = generate_scene(rng, max_objects=4)
        words = scene.caption.split()
        nouns = [t for t, word in enumerate(words) if word in SHAPES]
        # One-hot maps (hard attention) on the cell holding each object's centre.
        attention = np.zeros((len(words), 8, 8))
        for t, obj in zip(nouns, scene.objects, strict=True):
            attention[t, int(obj.center[0]) // 8, int(obj.center[1]) // 8] = 1.0
        records = object_attention(words, attention, scene.objects)
        assert [r.position for r in records] == nouns
        # Captions describe the objects in order, each phrase exactly.
        assert [(r.object, r.exact, r.share) for r in records] == [
            (k, True, 1.0) for k in range(len(scene.objects))
        ]


def test_object_attention_rejects_too_few_rows():
    with pytest.raises(ValueError, match=r"T >= len\(words\) = 4. Received: attention shape"):
        object_attention("a small red circle".split(), np.zeros((3, 8, 8)), OBJECTS)
    with pytest.raises(ValueError, match="attention shape"):
        object_attention("a small red circle".split(), np.zeros((4, 64)), OBJECTS)


def test_summary_means_ratios_and_empty_input():
    records = [
        NounAttention(3, ("small", "red", "circle"), 0, True, 0.5, 0.1, (0.2, 0.4, 0.6, 0.5)),
        NounAttention(8, ("large", "red", "circle"), 1, False, 0.1, 0.2, (None, 0.2, 0.0, 0.1)),
        NounAttention(11, ("large", "red", "diamond"), None, False, None, None),
    ]
    summary = summarize_object_attention(records)
    assert (summary["nouns"], summary["grounded"], summary["exact"]) == (3, 2, 1)
    assert summary["share"] == pytest.approx(0.3) and summary["uniform"] == pytest.approx(0.15)
    assert summary["ratio"] == pytest.approx(2.0) and summary["exact_ratio"] == pytest.approx(5.0)
    assert summary["phrase_shares"] == pytest.approx([0.2, 0.3, 0.3, 0.3])
    empty = summarize_object_attention(records[2:])
    assert (empty["nouns"], empty["grounded"], empty["share"], empty["exact_ratio"]) == (
        1, 0, None, None,
    )  # fmt: skip
    assert empty["phrase_shares"] == [None] * 4
