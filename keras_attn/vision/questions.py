"""Questions about the generated scenes, answered from the scene's objects: a visual question
answering corpus.

Each scene of `keras_attn.vision.scene_splits` gets up to one question of each type, drawn
from its objects (`Scene.objects`) with a generator seeded by the corpus seed:

    type     question                          answer                 asked objects
    colour   "what colour is the <shape>?"     a colour               the one <shape>
    shape    "what shape is <colour>?"         a shape                the one <colour> object
    exists   "is there a <colour> shape?"      "yes" / "no" (half)    the <colour> objects
    count    "how many shapes are there?"      "one" ... "four"       every object

A colour question is asked only about a shape the scene has exactly once, a shape question only
about a colour it has exactly once, so every answer is determined by the image. Answers come
from the fixed vocabulary `ANSWERS`; the question's words from `QUESTION_WORDS`.

References:
    Antol, Agrawal, Lu, Mitchell, Batra, Zitnick and Parikh, 2015, "VQA: Visual Question
    Answering", arXiv:1505.00468; Johnson, Hariharan, van der Maaten, Fei-Fei, Zitnick and
    Girshick, 2017, "CLEVR", arXiv:1612.06890 (questions generated from a scene description).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from keras_attn.api_export import keras_attn_export
from keras_attn.vision.scenes import COLOURS, SHAPES, Scene, mask_to_grid, scene_splits

QUESTION_TYPES = ("colour", "shape", "exists", "count")
COUNTS = ("one", "two", "three", "four")
ANSWERS = (*COLOURS, *SHAPES, "yes", "no", *COUNTS)
QUESTION_WORDS = tuple(
    sorted(
        {"what", "colour", "is", "the", "shape", "there", "a", "how", "many", "shapes", "are", "?"}
        | set(COLOURS)
        | set(SHAPES)
    )
)
# Salt of the question generator's seed, beside the corpus seed (the scenes use [seed, split, k]).
_QUESTION_SALT = 7


@keras_attn_export("keras_attn.vision.SceneQuestion")
@dataclasses.dataclass(frozen=True, eq=False)
class SceneQuestion:
    """A question about a scene and its answer.

    Attributes:
        scene: the `Scene` asked about.
        question: the question text.
        answer: one of `ANSWERS`.
        type: one of `QUESTION_TYPES`.
        objects: indices into `scene.objects` of the objects the question is about (empty for
            "is there ...?" answered "no").
    """

    scene: Scene
    question: str
    answer: str
    type: str
    objects: tuple[int, ...]

    def region_mask(self) -> np.ndarray:
        """bool `(height, width)`: the pixels of the asked objects."""
        mask = np.zeros(self.scene.image.shape[:2], bool)
        for index in self.objects:
            mask |= self.scene.objects[index].mask
        return mask


def _only(values: Sequence[str], value: str) -> bool:
    return list(values).count(value) == 1


@keras_attn_export("keras_attn.vision.generate_questions")
def generate_questions(scene: Scene, rng: np.random.Generator) -> list[SceneQuestion]:
    """One question of each type that applies to `scene`, in `QUESTION_TYPES` order.

    Args:
        scene: a `Scene`.
        rng: the random generator (the questions are a function of its state).

    Returns:
        The `SceneQuestion`s (a colour or shape question only when some shape or colour occurs
        exactly once).

    Example:

    >>> from keras_attn.vision import generate_scene
    >>> scene = generate_scene(np.random.default_rng(3), 32, max_objects=2)
    >>> scene.caption
    'a small red triangle to the left of a small green circle'
    >>> for question in generate_questions(scene, np.random.default_rng(0)):
    ...     print(question.question, question.answer, question.objects)
    what colour is the circle? green (1,)
    what shape is green? circle (1,)
    is there a green shape? yes (1,)
    how many shapes are there? two (0, 1)
    """
    objects = scene.objects
    shapes = [obj.shape for obj in objects]
    colours = [obj.colour for obj in objects]
    questions = []
    unique_shapes = [i for i, shape in enumerate(shapes) if _only(shapes, shape)]
    if unique_shapes:
        i = unique_shapes[int(rng.integers(len(unique_shapes)))]
        text = f"what colour is the {shapes[i]}?"
        questions.append(SceneQuestion(scene, text, colours[i], "colour", (i,)))
    unique_colours = [i for i, colour in enumerate(colours) if _only(colours, colour)]
    if unique_colours:
        i = unique_colours[int(rng.integers(len(unique_colours)))]
        text = f"what shape is {colours[i]}?"
        questions.append(SceneQuestion(scene, text, shapes[i], "shape", (i,)))
    present = sorted(set(colours))
    if rng.random() < 0.5:
        colour = present[int(rng.integers(len(present)))]
    else:
        absent = [c for c in COLOURS if c not in present]
        colour = absent[int(rng.integers(len(absent)))]
    matching = tuple(i for i, obj_colour in enumerate(colours) if obj_colour == colour)
    answer = "yes" if matching else "no"
    questions.append(
        SceneQuestion(scene, f"is there a {colour} shape?", answer, "exists", matching)
    )
    count = COUNTS[len(objects) - 1]
    questions.append(
        SceneQuestion(
            scene, "how many shapes are there?", count, "count", tuple(range(len(objects)))
        )
    )
    return questions


@keras_attn_export("keras_attn.vision.question_splits")
def question_splits(
    seed: int = 0, sizes: dict[str, int] | None = None, image_size: int = 64
) -> dict[str, list[SceneQuestion]]:
    """The questions of `scene_splits(seed, sizes, image_size)`: each split's scenes, each with
    `generate_questions`, whose generator for scene `k` of split number `s` is
    `numpy.random.default_rng([seed, 7, s, k])`.

    Args:
        seed: the corpus seed.
        sizes: scenes per split (see `scene_splits`).
        image_size: image side in pixels.

    Returns:
        A dict from split name to its list of `SceneQuestion`s, scene by scene.

    Example:

    >>> splits = question_splits(seed=1, sizes={"train": 3}, image_size=32)
    >>> {q.type for q in splits["train"]} <= set(QUESTION_TYPES), len(splits["dev"])
    (True, 0)
    """
    scenes = scene_splits(seed=seed, sizes=sizes, image_size=image_size)
    splits = {}
    for index, (name, split) in enumerate(scenes.items()):
        questions = []
        for k, scene in enumerate(split):
            rng = np.random.default_rng([seed, _QUESTION_SALT, index, k])
            questions.extend(generate_questions(scene, rng))
        splits[name] = questions
    return splits


@keras_attn_export("keras_attn.vision.asked_regions")
def asked_regions(question: SceneQuestion, grid_shape: tuple[int, int]) -> np.ndarray:
    """bool `grid_shape`: the cells of an `H' x W'` grid of image regions that the asked
    objects cover (any of their pixels).

    Example:

    >>> from keras_attn.vision import generate_scene
    >>> scene = generate_scene(np.random.default_rng(0), 32, max_objects=1)
    >>> question = generate_questions(scene, np.random.default_rng(0))[0]
    >>> int(asked_regions(question, (4, 4)).sum()) >= 1
    True
    """
    return mask_to_grid(question.region_mask(), grid_shape) > 0
