"""Questions about the generated scenes: each answer checked against the scene's objects, the
asked objects recorded, the vocabularies closed and the splits deterministic."""

import collections
import re

import numpy as np

from keras_attn.vision import (
    ANSWERS,
    COLOURS,
    QUESTION_TYPES,
    QUESTION_WORDS,
    SHAPES,
    asked_regions,
    generate_questions,
    generate_scene,
    mask_to_grid,
    question_splits,
)

SPLITS = question_splits(seed=4, sizes={"train": 150, "dev": 30}, image_size=32)
QUESTIONS = SPLITS["train"] + SPLITS["dev"]
COUNTS = ("one", "two", "three", "four")


def expected(question):
    """`(answer, asked objects)` worked out from the scene's objects and the question's text."""
    objects = question.scene.objects
    if match := re.fullmatch(r"what colour is the (\w+)\?", question.question):
        found = [i for i, obj in enumerate(objects) if obj.shape == match[1]]
        assert len(found) == 1, question.question  # asked only about a shape seen once
        return objects[found[0]].colour, tuple(found)
    if match := re.fullmatch(r"what shape is (\w+)\?", question.question):
        found = [i for i, obj in enumerate(objects) if obj.colour == match[1]]
        assert len(found) == 1, question.question
        return objects[found[0]].shape, tuple(found)
    if match := re.fullmatch(r"is there a (\w+) shape\?", question.question):
        found = tuple(i for i, obj in enumerate(objects) if obj.colour == match[1])
        return ("yes" if found else "no"), found
    assert question.question == "how many shapes are there?"
    return COUNTS[len(objects) - 1], tuple(range(len(objects)))


def test_every_answer_and_asked_object_follows_from_the_scene():
    for question in QUESTIONS:
        assert (question.answer, question.objects) == expected(question), question.question
        assert question.type in QUESTION_TYPES and question.answer in ANSWERS


def test_each_scene_gets_one_question_of_each_type_that_applies():
    by_scene = collections.defaultdict(list)
    for question in QUESTIONS:
        by_scene[id(question.scene)].append(question.type)
    for types in by_scene.values():
        assert types == [t for t in QUESTION_TYPES if t in types]  # once each, in order
        assert "exists" in types and "count" in types
    counts = collections.Counter(q.type for q in QUESTIONS)
    assert counts["colour"] > 100 and counts["shape"] > 100
    # "is there ...?" is answered yes about half the time
    yes = np.mean([q.answer == "yes" for q in QUESTIONS if q.type == "exists"])
    assert 0.35 < yes < 0.65


def test_the_vocabularies_are_closed():
    assert set(ANSWERS) == {*COLOURS, *SHAPES, "yes", "no", *COUNTS}
    assert len(set(ANSWERS)) == len(ANSWERS) == 16
    words = {word for q in QUESTIONS for word in q.question.replace("?", " ?").split()}
    assert words <= set(QUESTION_WORDS)


def test_the_splits_are_a_function_of_the_seed():
    again = question_splits(seed=4, sizes={"train": 150, "dev": 30}, image_size=32)
    for name in ("train", "dev"):
        assert [(q.question, q.answer, q.objects) for q in again[name]] == [
            (q.question, q.answer, q.objects) for q in SPLITS[name]
        ]
        assert all(
            np.array_equal(a.scene.image, b.scene.image)
            for a, b in zip(again[name], SPLITS[name], strict=True)
        )
    other = question_splits(seed=5, sizes={"train": 150}, image_size=32)["train"]
    assert [q.question for q in other] != [q.question for q in SPLITS["train"]]


def test_asked_regions_are_the_cells_the_asked_objects_cover():
    question = next(q for q in QUESTIONS if q.type == "colour")
    obj = question.scene.objects[question.objects[0]]
    cells = asked_regions(question, (4, 4))
    np.testing.assert_array_equal(cells, mask_to_grid(obj.mask, (4, 4)) > 0)
    assert 1 <= cells.sum() < 16
    absent = next(q for q in QUESTIONS if q.answer == "no")
    assert not asked_regions(absent, (4, 4)).any()


def test_generation_is_a_function_of_the_generator_state():
    scene = generate_scene(np.random.default_rng(9), 32)
    first = generate_questions(scene, np.random.default_rng(1))
    second = generate_questions(scene, np.random.default_rng(1))
    assert [(q.question, q.answer) for q in first] == [(q.question, q.answer) for q in second]
