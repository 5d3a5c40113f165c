"""A generated image-captioning corpus: scenes of coloured shapes and captions from a grammar.

Every scene is a `size x size` RGB image (uint8) on a dark background with 1 to 4
non-overlapping objects. An object has a shape (`SHAPES`), a colour (`COLOURS`) and a size
(`SIZES`); its pixels are painted in exactly its colour (no anti-aliasing), so its boolean mask
is the set of pixels it covers, and its bounding box is the mask's. The caption names every
object and the relation between the objects of a pair:

    caption  := clause (" and " clause)*
    clause   := object | object " " relation " " object
    object   := "a " size " " colour " " shape
    relation := "to the left of" | "above" | "below"

Objects are described from left to right (by the centre's column) and paired in that order:
the first with the second, the third with the fourth; with an odd count the last one stands
alone. The relation of a pair is that of the first object to the second: "to the left of" when
the horizontal offset of the centres is at least `RELATION_MARGIN` times the vertical one,
"above"/"below" when the vertical offset is at least `RELATION_MARGIN` times the horizontal one;
scenes in between are not drawn, so every relation is clear from the image.

`scene_splits` draws disjoint train/dev/test splits whose objects never have a held-out
(colour, shape) pair, and an `unseen` split in which every scene has at least one object with a
held-out pair: attribute combinations the training split never shows (the compositional test of
Show, Attend and Tell style captioners). Everything is a deterministic function of the seed.

References:
    Xu, Ba, Kiros, Cho, Courville, Salakhutdinov, Zemel and Bengio, 2015, "Show, Attend and
    Tell: Neural Image Caption Generation with Visual Attention", arXiv:1502.03044.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Sequence

import numpy as np

from keras_attn.api_export import keras_attn_export

SHAPES = ("circle", "square", "triangle", "diamond")
COLOURS = {
    "red": (220, 40, 40),
    "green": (40, 180, 60),
    "blue": (50, 90, 235),
    "yellow": (235, 215, 40),
    "purple": (155, 60, 205),
    "white": (240, 240, 240),
}
# Radius ranges (pixels, inclusive) of a 64-pixel image; they scale with the image size.
SIZES = {"small": (5, 7), "large": (10, 13)}
BACKGROUND = (24, 24, 24)
RELATIONS = ("to the left of", "above", "below")
RELATION_MARGIN = 1.5
# Free pixels kept between the bounding boxes of two objects.
GAP = 2
# One (colour, shape) pair per shape, each colour at most once: every colour and every shape
# still appears in training.
HELD_OUT_PAIRS = (
    ("red", "triangle"),
    ("blue", "circle"),
    ("green", "diamond"),
    ("yellow", "square"),
)
SPLITS = ("train", "dev", "test", "unseen")
DEFAULT_SPLIT_SIZES = {"train": 2000, "dev": 200, "test": 200, "unseen": 200}
CAPTION_WORDS = tuple(
    sorted(
        {"a", "and"}
        | set(SIZES)
        | set(COLOURS)
        | set(SHAPES)
        | {word for relation in RELATIONS for word in relation.split()}
    )
)
MAX_CAPTION_WORDS = 2 * (4 + 4 + 4) + 1  # two pairs: "a size colour shape" x 4, relations, "and"


@keras_attn_export("keras_attn.vision.SceneObject")
@dataclasses.dataclass(frozen=True, eq=False)
class SceneObject:
    """One drawn object of a scene.

    Attributes:
        shape, colour, size: its attributes (`SHAPES`, `COLOURS`, `SIZES`).
        center: `(row, column)` of its centre in pixels.
        radius: its radius in pixels (circumradius for the polygons, half the side of a square).
        mask: bool `(height, width)`, True on the pixels it covers.
        box: `(row_start, column_start, row_stop, column_stop)`, the mask's bounding box (stops
            exclusive).
    """

    shape: str
    colour: str
    size: str
    center: tuple[float, float]
    radius: float
    mask: np.ndarray
    box: tuple[int, int, int, int]

    @property
    def phrase(self) -> str:
        """`"a <size> <colour> <shape>"`."""
        return f"a {self.size} {self.colour} {self.shape}"


@keras_attn_export("keras_attn.vision.Scene")
@dataclasses.dataclass(frozen=True, eq=False)
class Scene:
    """An image, the objects drawn on it (in caption order) and its caption.

    Attributes:
        image: uint8 `(height, width, 3)`.
        objects: the `SceneObject`s from left to right, the order the caption names them.
        caption: the caption (see the module docstring for its grammar).
    """

    image: np.ndarray
    objects: tuple[SceneObject, ...]
    caption: str


@keras_attn_export("keras_attn.vision.ParsedCaption")
@dataclasses.dataclass(frozen=True)
class ParsedCaption:
    """A caption read back by `parse_caption`.

    Attributes:
        objects: `(size, colour, shape)` per named object, in caption order.
        relations: `(i, relation, j)` per clause with two objects: object `i` is `relation` of
            object `j` (indices into `objects`).
    """

    objects: tuple[tuple[str, str, str], ...]
    relations: tuple[tuple[int, str, int], ...]


def shape_mask(shape: str, center: tuple[float, float], radius: float, size: int) -> np.ndarray:
    """The bool `(size, size)` mask of a shape, tested at pixel centres.

    circle: `|p - c| <= r`; square: `max(|dy|, |dx|) <= r`; diamond: `|dy| + |dx| <= r`;
    triangle: the upward triangle with vertices at distance `r` from the centre.
    """
    if shape not in SHAPES:
        raise ValueError(f"Expected shape in {SHAPES}. Received: shape={shape!r}")
    rows, cols = np.mgrid[0:size, 0:size].astype("float64") + 0.5
    dy, dx = rows - center[0], cols - center[1]
    if shape == "circle":
        return dy**2 + dx**2 <= radius**2
    if shape == "square":
        return np.maximum(np.abs(dy), np.abs(dx)) <= radius
    if shape == "diamond":
        return np.abs(dy) + np.abs(dx) <= radius
    # Upward triangle: apex above the centre, base below it (half-planes of its three edges).
    height = 1.5 * radius  # apex at -r, base at +r/2
    half_base = radius * np.sqrt(3.0) / 2.0
    below_apex_edges = np.abs(dx) * height <= half_base * (dy + radius)
    return below_apex_edges & (dy <= radius / 2.0)


def relation_of(first: SceneObject, second: SceneObject) -> str | None:
    """The relation of `first` to `second` (`RELATIONS`), or None when it is not clear.

    "to the left of" needs `first` left of `second`; a pair in the other order has no relation
    (captions name the left object first).
    """
    dy = second.center[0] - first.center[0]
    dx = second.center[1] - first.center[1]
    if dx >= RELATION_MARGIN * abs(dy) and dx > 0:
        return "to the left of"
    if abs(dy) >= RELATION_MARGIN * abs(dx):
        return "above" if dy > 0 else "below"
    return None


def describe(objects: Sequence[SceneObject]) -> str:
    """The caption of objects given from left to right (see the module docstring).

    Raises:
        ValueError: when a pair's relation is not clear (`relation_of` is None).
    """
    clauses = []
    for start in range(0, len(objects), 2):
        pair = objects[start : start + 2]
        if len(pair) == 1:
            clauses.append(pair[0].phrase)
            continue
        relation = relation_of(*pair)
        if relation is None:
            raise ValueError(
                f"Expected objects whose relation is clear. Received: centres "
                f"{pair[0].center} and {pair[1].center}"
            )
        clauses.append(f"{pair[0].phrase} {relation} {pair[1].phrase}")
    return " and ".join(clauses)


@keras_attn_export("keras_attn.vision.parse_caption")
def parse_caption(caption: str) -> ParsedCaption:
    """Read a caption of the grammar back into its objects and relations.

    Args:
        caption: a caption as `describe` writes it.

    Returns:
        A `ParsedCaption`.

    Raises:
        ValueError: when `caption` is not a sentence of the grammar.

    Example:

    >>> parse_caption("a small red circle to the left of a large blue square")
    ParsedCaption(objects=(('small', 'red', 'circle'), ('large', 'blue', 'square')), \
relations=((0, 'to the left of', 1),))
    """
    words = caption.split()
    objects: list[tuple[str, str, str]] = []
    relations: list[tuple[int, str, int]] = []
    position = 0

    def fail(reason: str):
        raise ValueError(f"{reason} at word {position}. Received: caption={caption!r}")

    def read_object() -> None:
        nonlocal position
        phrase = words[position : position + 4]
        if len(phrase) < 4 or phrase[0] != "a":
            fail("Expected 'a <size> <colour> <shape>'")
        _, size, colour, shape = phrase
        if size not in SIZES or colour not in COLOURS or shape not in SHAPES:
            fail(
                f"Expected a size in {tuple(SIZES)}, colour in {tuple(COLOURS)}, shape in {SHAPES}"
            )
        objects.append((size, colour, shape))
        position += 4

    while True:
        read_object()
        for relation in RELATIONS:
            relation_words = relation.split()
            if words[position : position + len(relation_words)] == relation_words:
                position += len(relation_words)
                relations.append((len(objects) - 1, relation, len(objects)))
                read_object()
                break
        if position == len(words):
            return ParsedCaption(tuple(objects), tuple(relations))
        if words[position] != "and":
            fail("Expected 'and' or a relation")
        position += 1


def _scaled_radius(rng: np.random.Generator, size_name: str, image_size: int) -> float:
    low, high = SIZES[size_name]
    return float(rng.integers(low, high + 1)) * image_size / 64.0


def _place(
    rng: np.random.Generator,
    attributes: Sequence[tuple[str, str, str]],
    image_size: int,
    attempts: int = 50,
) -> list[SceneObject] | None:
    """Objects with these `(size, colour, shape)` at random non-overlapping places, or None."""
    placed: list[SceneObject] = []
    taken = np.zeros((image_size, image_size), bool)
    for size_name, colour, shape in attributes:
        radius = _scaled_radius(rng, size_name, image_size)
        for _ in range(attempts):
            low, high = radius + 1.0, image_size - radius - 1.0
            center = (float(rng.uniform(low, high)), float(rng.uniform(low, high)))
            mask = shape_mask(shape, center, radius, image_size)
            rows, cols = np.nonzero(mask)
            box = (int(rows.min()), int(cols.min()), int(rows.max()) + 1, int(cols.max()) + 1)
            grown = (
                slice(max(box[0] - GAP, 0), box[2] + GAP),
                slice(max(box[1] - GAP, 0), box[3] + GAP),
            )
            if not taken[grown].any():
                taken[box[0] : box[2], box[1] : box[3]] = True
                placed.append(SceneObject(shape, colour, size_name, center, radius, mask, box))
                break
        else:
            return None
    return placed


def _draw(objects: Iterable[SceneObject], image_size: int) -> np.ndarray:
    image = np.empty((image_size, image_size, 3), np.uint8)
    image[...] = BACKGROUND
    for obj in objects:
        image[obj.mask] = COLOURS[obj.colour]
    return image


def _check_pairs(pairs: Sequence[tuple[str, str]], name: str) -> tuple[tuple[str, str], ...]:
    pairs = tuple((str(colour), str(shape)) for colour, shape in pairs)
    for colour, shape in pairs:
        if colour not in COLOURS or shape not in SHAPES:
            raise ValueError(
                f"Expected (colour, shape) pairs with colour in {tuple(COLOURS)} and shape in "
                f"{SHAPES}. Received: {name}={pairs!r}"
            )
    return pairs


@keras_attn_export("keras_attn.vision.generate_scene")
def generate_scene(
    rng: np.random.Generator,
    image_size: int = 64,
    max_objects: int = 4,
    allowed_pairs: Sequence[tuple[str, str]] | None = None,
    required_pairs: Sequence[tuple[str, str]] = (),
) -> Scene:
    """Draw one scene.

    Args:
        rng: the random generator (the scene is a function of its state).
        image_size: side of the square image in pixels, at least 32.
        max_objects: the most objects, 1 to 4; the count is uniform in `[1, max_objects]`.
        allowed_pairs: the (colour, shape) pairs objects may have (default: all).
        required_pairs: when not empty, one object (at a random place in the scene) takes a
            pair from these.

    Returns:
        A `Scene`.
    """
    if isinstance(image_size, bool) or not isinstance(image_size, int) or image_size < 32:
        raise ValueError(
            f"Expected image_size to be an integer >= 32. Received: image_size={image_size!r}"
        )
    if isinstance(max_objects, bool) or max_objects not in (1, 2, 3, 4):
        raise ValueError(f"Expected max_objects in 1..4. Received: max_objects={max_objects!r}")
    allowed = (
        tuple((c, s) for c in COLOURS for s in SHAPES)
        if allowed_pairs is None
        else _check_pairs(allowed_pairs, "allowed_pairs")
    )
    required = _check_pairs(required_pairs, "required_pairs")
    if not allowed:
        raise ValueError(f"Expected at least one allowed pair. Received: allowed_pairs={allowed}")
    sizes = tuple(SIZES)
    while True:
        count = int(rng.integers(1, max_objects + 1))
        pairs = [allowed[int(rng.integers(len(allowed)))] for _ in range(count)]
        if required:
            pairs[int(rng.integers(count))] = required[int(rng.integers(len(required)))]
        attributes = [(sizes[int(rng.integers(len(sizes)))], c, s) for c, s in pairs]
        objects = _place(rng, attributes, image_size)
        if objects is None:
            continue
        objects.sort(key=lambda obj: (obj.center[1], obj.center[0]))
        if all(
            relation_of(objects[i], objects[i + 1]) is not None
            for i in range(0, len(objects) - 1, 2)
        ):
            break
    return Scene(_draw(objects, image_size), tuple(objects), describe(objects))


@keras_attn_export("keras_attn.vision.scene_splits")
def scene_splits(
    seed: int = 0,
    sizes: dict[str, int] | None = None,
    image_size: int = 64,
    max_objects: int = 4,
    held_out_pairs: Sequence[tuple[str, str]] = HELD_OUT_PAIRS,
) -> dict[str, list[Scene]]:
    """The corpus: disjoint `train`, `dev`, `test` and `unseen` splits of scenes.

    Scene `k` of a split is drawn from `numpy.random.default_rng([seed, split, k])`, so a split
    is a deterministic function of the seed and a larger size only appends scenes. No object of
    `train`, `dev` or `test` has a pair of `held_out_pairs`; every `unseen` scene has at least
    one such object. A scene whose image already occurs in an earlier split is skipped, so no
    image is in two splits.

    Args:
        seed: the corpus seed.
        sizes: scenes per split, a dict over some of `SPLITS` (default `DEFAULT_SPLIT_SIZES`;
            missing splits are empty).
        image_size: image side in pixels.
        max_objects: the most objects per scene (1 to 4).
        held_out_pairs: (colour, shape) pairs kept out of train/dev/test; empty gives an empty
            `unseen` split.

    Returns:
        A dict from split name to its list of `Scene`s.

    Example:

    >>> splits = scene_splits(seed=3, sizes={"train": 2, "unseen": 1})
    >>> [len(splits[name]) for name in SPLITS], splits["train"][0].image.shape
    ([2, 0, 0, 1], (64, 64, 3))
    """
    sizes = dict(DEFAULT_SPLIT_SIZES if sizes is None else sizes)
    unknown = sorted(set(sizes) - set(SPLITS))
    if unknown:
        raise ValueError(f"Expected split names in {SPLITS}. Received: sizes={sizes!r}")
    for count in sizes.values():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(
                f"Expected non-negative integer split sizes. Received: sizes={sizes!r}"
            )
    held_out = _check_pairs(held_out_pairs, "held_out_pairs")
    if sizes.get("unseen", 0) and not held_out:
        raise ValueError(
            "Expected held_out_pairs for a non-empty unseen split. Received: held_out_pairs=()"
        )
    seen = tuple((c, s) for c in COLOURS for s in SHAPES if (c, s) not in held_out)
    images_so_far: set[bytes] = set()
    splits: dict[str, list[Scene]] = {}
    for index, name in enumerate(SPLITS):
        scenes: list[Scene] = []
        k = 0
        while len(scenes) < sizes.get(name, 0):
            rng = np.random.default_rng([seed, index, k])
            k += 1
            if name == "unseen":
                scene = generate_scene(rng, image_size, max_objects, None, held_out)
            else:
                scene = generate_scene(rng, image_size, max_objects, seen)
            digest = hashlib.sha256(scene.image.tobytes()).digest()
            if digest in images_so_far:
                continue
            images_so_far.add(digest)
            scenes.append(scene)
        splits[name] = scenes
    return splits


@keras_attn_export("keras_attn.vision.mask_to_grid")
def mask_to_grid(mask: np.ndarray, grid_shape: tuple[int, int]) -> np.ndarray:
    """The share of each cell of a `grid_shape` grid that a pixel mask covers.

    The image `(height, width)` is cut into `grid_shape = (H', W')` equal cells (height and
    width divisible by them), the regions a convolutional encoder's feature grid stands for.

    Args:
        mask: bool `(height, width)`.
        grid_shape: `(H', W')`.

    Returns:
        float64 `(H', W')` in `[0, 1]`.

    Example:

    >>> mask = np.zeros((4, 4), bool); mask[:2, :1] = True
    >>> mask_to_grid(mask, (2, 2)).tolist()
    [[0.5, 0.0], [0.0, 0.0]]
    """
    mask = np.asarray(mask, bool)
    rows, cols = grid_shape
    if mask.ndim != 2 or mask.shape[0] % rows or mask.shape[1] % cols:
        raise ValueError(
            f"Expected a 2-D mask whose sides are divisible by grid_shape. Received: mask shape "
            f"{mask.shape}, grid_shape={grid_shape!r}"
        )
    cells = mask.reshape(rows, mask.shape[0] // rows, cols, mask.shape[1] // cols)
    return cells.mean(axis=(1, 3))


@keras_attn_export("keras_attn.vision.encode_png")
def encode_png(image: np.ndarray) -> bytes:
    """PNG bytes of a uint8 `(height, width, 3)` image (`tf.io.encode_png`).

    Example:

    >>> encode_png(np.zeros((2, 2, 3), np.uint8))[:4]
    b'\\x89PNG'
    """
    import tensorflow as tf

    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[-1] != 3:
        raise ValueError(
            "Expected a uint8 (height, width, 3) image. Received: "
            f"dtype={image.dtype}, shape={image.shape}"
        )
    return tf.io.encode_png(image).numpy()


@keras_attn_export("keras_attn.vision.caption_ids")
def caption_ids(caption: str, words: Sequence[str], start_id: int, end_id: int) -> list[int]:
    """`[start_id, ids of the words..., end_id]` of a caption in a word list.

    Args:
        caption: a caption.
        words: the vocabulary; word `words[k]` gets id `k`.
        start_id, end_id: the ids put first and last.

    Example:

    >>> caption_ids("a red circle", ["<pad>", "<s>", "</s>", *CAPTION_WORDS], 1, 2)
    [1, 3, 15, 8, 2]
    """
    index = {word: k for k, word in enumerate(words)}
    unknown = [word for word in caption.split() if word not in index]
    if unknown:
        raise ValueError(f"Expected words of the vocabulary. Received unknown words: {unknown}")
    return [start_id, *(index[word] for word in caption.split()), end_id]
