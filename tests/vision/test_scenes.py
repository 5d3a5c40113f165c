"""The generated captioning corpus: determinism, masks, the caption grammar and the splits."""

import hashlib

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.vision import scenes
from keras_attn.vision.scenes import (
    BACKGROUND,
    CAPTION_WORDS,
    COLOURS,
    HELD_OUT_PAIRS,
    MAX_CAPTION_WORDS,
    SHAPES,
    SIZES,
    caption_ids,
    encode_png,
    generate_scene,
    mask_to_grid,
    parse_caption,
    relation_of,
    scene_splits,
    shape_mask,
)

SIZES_SMALL = {"train": 120, "dev": 30, "test": 30, "unseen": 40}


@pytest.fixture(scope="module")
def splits():
    return scene_splits(seed=5, sizes=SIZES_SMALL)


def all_scenes(splits):
    return [scene for name in scenes.SPLITS for scene in splits[name]]


def test_same_seed_same_corpus_other_seed_other_corpus(splits):
    again = scene_splits(seed=5, sizes=SIZES_SMALL)
    for name in scenes.SPLITS:
        assert [s.caption for s in again[name]] == [s.caption for s in splits[name]]
        for a, b in zip(again[name], splits[name], strict=True):
            np.testing.assert_array_equal(a.image, b.image)
    other = scene_splits(seed=6, sizes={"train": 20})["train"]
    assert (
        sum(np.array_equal(a.image, b.image) for a, b in zip(other, splits["train"], strict=False))
        == 0
    )


def test_a_larger_split_only_appends_scenes(splits):
    shorter = scene_splits(seed=5, sizes={"train": 10})["train"]
    for a, b in zip(shorter, splits["train"][:10], strict=True):
        np.testing.assert_array_equal(a.image, b.image)


def test_split_sizes(splits):
    assert {name: len(value) for name, value in splits.items()} == SIZES_SMALL


def test_masks_are_exactly_the_painted_pixels(splits):
    for scene in all_scenes(splits):
        assert scene.image.dtype == np.uint8 and scene.image.shape == (64, 64, 3)
        covered = np.zeros((64, 64), int)
        for obj in scene.objects:
            covered += obj.mask
            assert obj.mask.any()
            assert (scene.image[obj.mask] == COLOURS[obj.colour]).all()
            rows, cols = np.nonzero(obj.mask)
            assert obj.box == (rows.min(), cols.min(), rows.max() + 1, cols.max() + 1)
        assert covered.max() == 1, "objects overlap"
        assert (scene.image[covered == 0] == BACKGROUND).all()


def test_bounding_boxes_keep_a_gap(splits):
    for scene in all_scenes(splits):
        boxes = [obj.box for obj in scene.objects]
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                apart_rows = a[2] + scenes.GAP <= b[0] or b[2] + scenes.GAP <= a[0]
                apart_cols = a[3] + scenes.GAP <= b[1] or b[3] + scenes.GAP <= a[1]
                assert apart_rows or apart_cols


def test_the_corpus_varies(splits):
    train = splits["train"]
    counts = {len(s.objects) for s in train}
    objects = [obj for s in train for obj in s.objects]
    assert counts == {1, 2, 3, 4}
    assert {obj.shape for obj in objects} == set(SHAPES)
    assert {obj.colour for obj in objects} == set(COLOURS)
    assert {obj.size for obj in objects} == set(SIZES)
    centres = np.array([obj.center for obj in objects])
    assert centres.min() < 16 and centres.max() > 48
    # Single-object captions (40 possible) repeat; longer ones almost never do.
    assert len({s.caption for s in train}) > 0.8 * len(train)


def test_shapes_have_their_geometry():
    size, centre, radius = 64, (32.3, 31.8), 12.0
    area = {shape: shape_mask(shape, centre, radius, size).sum() for shape in SHAPES}
    # Pixel counts close to the continuous areas: pi r^2, (2r)^2, 2 r^2, 3 sqrt(3)/4 r^2.
    expected = {
        "circle": np.pi * radius**2,
        "square": (2 * radius) ** 2,
        "diamond": 2 * radius**2,
        "triangle": 3 * np.sqrt(3) / 4 * radius**2,
    }
    for shape in SHAPES:
        assert abs(area[shape] - expected[shape]) < 0.08 * expected[shape], shape
    triangle = shape_mask("triangle", centre, radius, size)
    rows = np.nonzero(triangle)[0]
    widths = triangle.sum(axis=1)
    assert widths[rows.min()] < widths[rows.max()], "the apex is at the top"


def test_captions_parse_back_to_the_scene(splits):
    for scene in all_scenes(splits):
        parsed = parse_caption(scene.caption)
        assert parsed.objects == tuple((o.size, o.colour, o.shape) for o in scene.objects)
        pairs = len(scene.objects) // 2
        assert len(parsed.relations) == pairs
        for i, relation, j in parsed.relations:
            first, second = scene.objects[i], scene.objects[j]
            assert (i, j) == (i, i + 1) and i % 2 == 0
            # The relation read back agrees with the objects' pixels (mask centroids).
            dy, dx = np.subtract(np.argwhere(second.mask).mean(0), np.argwhere(first.mask).mean(0))
            if relation == "to the left of":
                assert dx > abs(dy)
            else:
                assert abs(dy) > abs(dx) and (dy > 0) == (relation == "above")
        assert len(scene.caption.split()) <= MAX_CAPTION_WORDS
        assert set(scene.caption.split()) <= set(CAPTION_WORDS)
        assert [o.center[1] for o in scene.objects] == sorted(o.center[1] for o in scene.objects)


def test_every_relation_occurs(splits):
    relations = {r for s in splits["train"] for _, r, _ in parse_caption(s.caption).relations}
    assert relations == set(scenes.RELATIONS)


@pytest.mark.parametrize(
    "caption",
    [
        "",
        "a small red",
        "a tiny red circle",
        "a small red circle or a large blue square",
        "a small red circle to the left a large blue square",
        "a small red circle and",
    ],
)
def test_parse_rejects_non_sentences(caption):
    with pytest.raises(ValueError, match="caption="):
        parse_caption(caption)


def test_relation_of_needs_a_clear_offset():
    def at(row, col):
        return scenes.SceneObject("circle", "red", "small", (row, col), 5.0, None, (0, 0, 0, 0))

    assert relation_of(at(30, 10), at(32, 40)) == "to the left of"
    assert relation_of(at(10, 30), at(40, 33)) == "above"
    assert relation_of(at(40, 30), at(10, 33)) == "below"
    assert relation_of(at(10, 10), at(30, 30)) is None
    assert relation_of(at(30, 40), at(32, 10)) is None


def digests(scene_list):
    return {hashlib.sha256(s.image.tobytes()).hexdigest() for s in scene_list}


def test_splits_are_disjoint(splits):
    sets = {name: digests(splits[name]) for name in scenes.SPLITS}
    for name in scenes.SPLITS:
        assert len(sets[name]) == len(splits[name])
    names = list(scenes.SPLITS)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not sets[a] & sets[b], (a, b)


def test_held_out_pairs_only_in_the_unseen_split(splits):
    held_out = set(HELD_OUT_PAIRS)
    for name in ("train", "dev", "test"):
        pairs = {(o.colour, o.shape) for s in splits[name] for o in s.objects}
        assert not pairs & held_out, name
    for scene in splits["unseen"]:
        assert {(o.colour, o.shape) for o in scene.objects} & held_out
    train_pairs = {(o.colour, o.shape) for s in splits["train"] for o in s.objects}
    # Each held-out colour and shape is still seen in training, in other combinations.
    assert {c for c, _ in held_out} <= {c for c, _ in train_pairs}
    assert {s for _, s in held_out} <= {s for _, s in train_pairs}


def test_png_round_trip(splits):
    image = splits["test"][0].image
    data = encode_png(image)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    np.testing.assert_array_equal(tf.io.decode_png(data, channels=3).numpy(), image)
    with pytest.raises(ValueError, match="dtype=float32"):
        encode_png(image.astype("float32"))


def test_mask_to_grid_is_the_covered_share_per_cell(splits):
    obj = splits["train"][0].objects[0]
    grid = mask_to_grid(obj.mask, (8, 8))
    assert grid.shape == (8, 8)
    np.testing.assert_allclose(grid.sum() * 64, obj.mask.sum())
    row, col = int(obj.center[0]) // 8, int(obj.center[1]) // 8
    assert grid[row, col] > 0
    with pytest.raises(ValueError, match="grid_shape"):
        mask_to_grid(obj.mask, (7, 7))


def test_caption_ids():
    words = ["<pad>", "<s>", "</s>", *CAPTION_WORDS]
    ids = caption_ids("a large blue square", words, 1, 2)
    assert [words[i] for i in ids] == ["<s>", "a", "large", "blue", "square", "</s>"]
    with pytest.raises(ValueError, match="huge"):
        caption_ids("a huge square", words, 1, 2)


def test_generate_scene_options():
    rng = np.random.default_rng(0)
    for _ in range(20):
        scene = generate_scene(rng, image_size=32, max_objects=1, allowed_pairs=[("red", "square")])
        assert len(scene.objects) == 1 and scene.image.shape == (32, 32, 3)
        assert scene.caption in ("a small red square", "a large red square")
    scene = generate_scene(rng, required_pairs=[("white", "circle")])
    assert ("white", "circle") in {(o.colour, o.shape) for o in scene.objects}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"image_size": 16}, "image_size=16"),
        ({"max_objects": 5}, "max_objects=5"),
        ({"allowed_pairs": [("pink", "circle")]}, "allowed_pairs="),
        ({"allowed_pairs": []}, "allowed_pairs=()"),
    ],
)
def test_generate_scene_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        generate_scene(np.random.default_rng(0), **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sizes": {"training": 3}}, "sizes="),
        ({"sizes": {"train": -1}}, "sizes="),
        ({"sizes": {"unseen": 2}, "held_out_pairs": ()}, "held_out_pairs"),
    ],
)
def test_scene_splits_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        scene_splits(**kwargs)
