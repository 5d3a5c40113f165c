"""Does attention look where a word points? Attention mass on the object a noun names.

When a captioner emits an object's noun (a shape word of the scene grammar), the object phrase
around it (`"a <size> <colour> <shape>"`) names an object of the scene. `noun_objects` finds,
for every shape word of a caption, the scene object its phrase names; `object_attention`
measures the share of that word's attention map that falls inside the object's region (the
cells of the feature grid its mask covers, `mask_to_grid`), against the share a uniform map
would put there (region cells / L). A captioner whose attention follows its words puts more
than the uniform share on the object; Xu et al. (2015) show it in their Fig. 2 and 3.

References:
    Xu, Ba, Kiros, Cho, Courville, Salakhutdinov, Zemel and Bengio, 2015, "Show, Attend and
    Tell: Neural Image Caption Generation with Visual Attention", arXiv:1502.03044.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from keras_attn.api_export import keras_attn_export
from keras_attn.vision.scenes import COLOURS, SHAPES, SIZES, SceneObject, mask_to_grid

PHRASE_WORDS = 4  # "a <size> <colour> <shape>"


@keras_attn_export("keras_attn.vision.NounAttention")
@dataclasses.dataclass(frozen=True)
class NounAttention:
    """The attention of one emitted noun on the object it names.

    Attributes:
        position: the noun's index among the caption's words.
        phrase: `(size, colour, shape)` the caption names; size or colour is None where the
            words before the noun are not `"a <size> <colour>"`.
        object: index of the named object in the scene's objects, or None when the scene has
            no (further) object of that shape.
        exact: whether the object has all three attributes of the phrase.
        share: attention mass inside the object's region (None without an object).
        uniform: region cells / L, the share of a uniform map (None without an object).
        phrase_shares: the mass inside the object's region of the attention of each word of
            its phrase, `(a, size, colour, noun)` (rows `position - 3` to `position`; None
            before the caption's start); empty without an object.
    """

    position: int
    phrase: tuple[str | None, str | None, str]
    object: int | None
    exact: bool
    share: float | None
    uniform: float | None
    phrase_shares: tuple[float | None, ...] = ()


@keras_attn_export("keras_attn.vision.noun_objects")
def noun_objects(
    words: Sequence[str], objects: Sequence[SceneObject]
) -> list[tuple[int, tuple, int | None]]:
    """The scene object each shape word of a caption names.

    Each shape word ends an object phrase `"a <size> <colour> <shape>"` of the grammar
    (`keras_attn.vision.parse_caption`). Going through the caption's nouns in order, each is
    matched with the scene object of its shape, not matched before, that shares most of the
    phrase's size and colour (an exactly named object first); ties go to the leftmost object,
    as captions name objects from left to right. A generated caption may name an attribute
    wrongly and still point at the object; a noun whose shape no (further) object of the scene
    has is matched with none.

    Args:
        words: the caption's words (generated captions need not be grammatical).
        objects: the scene's objects, left to right (`Scene.objects`).

    Returns:
        `(position, (size, colour, shape), object index or None)` per shape word, in order;
        size or colour is None where the phrase is incomplete.

    Example:

    >>> from keras_attn.vision.scenes import generate_scene
    >>> scene = generate_scene(np.random.default_rng(1), max_objects=1)
    >>> noun_objects(scene.caption.split(), scene.objects)[0][2]
    0
    """
    unused = list(range(len(objects)))
    found = []
    for position, word in enumerate(words):
        if word not in SHAPES:
            continue
        before = list(words[max(position - 2, 0) : position])
        size = before[0] if len(before) == 2 and before[0] in SIZES else None
        colour = before[-1] if before and before[-1] in COLOURS else None
        candidates = [index for index in unused if objects[index].shape == word]
        match = None
        if candidates:
            # The most attributes in common first, then the leftmost.
            match = max(
                candidates,
                key=lambda i: (
                    (objects[i].colour == colour) + (objects[i].size == size),
                    -i,
                ),
            )
            unused.remove(match)
        found.append((position, (size, colour, word), match))
    return found


@keras_attn_export("keras_attn.vision.object_attention")
def object_attention(
    words: Sequence[str], attention: np.ndarray, objects: Sequence[SceneObject]
) -> list[NounAttention]:
    """The attention mass each emitted noun puts on the object it names.

    With the noun's attention map `alpha` `(H', W')` (summing to one) and the object's region
    `R` (the grid cells its mask covers, `mask_to_grid(mask, (H', W')) > 0`):

        share   = sum_{i in R} alpha_i / sum_i alpha_i
        uniform = |R| / (H' W')

    and the same share for the maps of the phrase's other words ("a", size, colour), the steps
    that lead up to the noun.

    Args:
        words: the caption's words.
        attention: `(T, H', W')` with `T >= len(words)`: row `t` is the attention of the step
            that emitted `words[t]` (as the exported captioner returns it).
        objects: the scene's objects, left to right (`Scene.objects`).

    Returns:
        One `NounAttention` per shape word of the caption (see `noun_objects`).

    Raises:
        ValueError: `attention` is not 3-D or has fewer rows than `words`.

    Example:

    >>> from keras_attn.vision.scenes import generate_scene
    >>> scene = generate_scene(np.random.default_rng(1), max_objects=1)
    >>> words = scene.caption.split()
    >>> uniform = np.full((len(words), 8, 8), 1 / 64)
    >>> record = object_attention(words, uniform, scene.objects)[0]
    >>> bool(np.isclose(record.share, record.uniform))
    True
    """
    attention = np.asarray(attention, np.float64)
    if attention.ndim != 3 or attention.shape[0] < len(words):
        raise ValueError(
            "Expected attention of shape (T, H', W') with T >= len(words) = "
            f"{len(words)}. Received: attention shape {attention.shape}"
        )
    grid = attention.shape[1:]
    records = []
    for position, phrase, index in noun_objects(words, objects):
        if index is None:
            records.append(NounAttention(position, phrase, None, False, None, None))
            continue
        obj = objects[index]
        exact = phrase == (obj.size, obj.colour, obj.shape)
        region = mask_to_grid(obj.mask, grid) > 0
        shares = tuple(
            _inside(attention[t], region) if t >= 0 else None
            for t in range(position - PHRASE_WORDS + 1, position + 1)
        )
        uniform = float(region.sum() / region.size)
        records.append(NounAttention(position, phrase, index, exact, shares[-1], uniform, shares))
    return records


def _inside(weights: np.ndarray, region: np.ndarray) -> float:
    total = weights.sum()
    return float(weights[region].sum() / total) if total > 0 else 0.0


def _means(records: Sequence[NounAttention]) -> tuple[float | None, float | None, float | None]:
    if not records:
        return None, None, None
    share = float(np.mean([record.share for record in records]))
    uniform = float(np.mean([record.uniform for record in records]))
    return share, uniform, share / uniform


@keras_attn_export("keras_attn.vision.summarize_object_attention")
def summarize_object_attention(records: Sequence[NounAttention]) -> dict:
    """Means over the nouns matched to an object of their scene, and over those that name it
    exactly.

    Returns:
        `{"nouns", "grounded", "share", "uniform", "ratio", "exact", "exact_share",
        "exact_uniform", "exact_ratio", "phrase_shares"}`: nouns emitted, nouns matched to an
        object, the mean share inside the object, the mean uniform share and their ratio
        `share / uniform`; then the same over the nouns whose phrase names all three attributes
        of their object; and the mean share of each word of the phrase (`a`, size, colour,
        noun) over the matched nouns that have it. None where no noun is left.

    Example:

    >>> records = [
    ...     NounAttention(3, ("small", "red", "circle"), 0, True, 0.6, 0.1, (0.3, 0.4, 0.5, 0.6)),
    ...     NounAttention(7, ("large", "red", "circle"), None, False, None, None),
    ...     NounAttention(9, ("small", "red", "square"), 1, False, 0.2, 0.1, (0.1, 0.2, 0.1, 0.2)),
    ... ]
    >>> summary = summarize_object_attention(records)
    >>> summary["nouns"], summary["grounded"], round(summary["share"], 4)
    (3, 2, 0.4)
    >>> round(summary["ratio"], 4), summary["exact"], round(summary["exact_ratio"], 4)
    (4.0, 1, 6.0)
    >>> [round(share, 4) for share in summary["phrase_shares"]]
    [0.2, 0.3, 0.3, 0.4]
    """
    grounded = [record for record in records if record.object is not None]
    exact = [record for record in grounded if record.exact]
    share, uniform, ratio = _means(grounded)
    exact_share, exact_uniform, exact_ratio = _means(exact)
    phrase_shares = []
    for offset in range(PHRASE_WORDS):
        values = [r.phrase_shares[offset] for r in grounded if r.phrase_shares[offset] is not None]
        phrase_shares.append(float(np.mean(values)) if values else None)
    return {
        "nouns": len(records),
        "grounded": len(grounded),
        "share": share,
        "uniform": uniform,
        "ratio": ratio,
        "exact": len(exact),
        "exact_share": exact_share,
        "exact_uniform": exact_uniform,
        "exact_ratio": exact_ratio,
        "phrase_shares": phrase_shares,
    }
