"""Generated image data: the captioning corpus of coloured-shape scenes, questions about them
(visual question answering), and the check that a captioner's attention falls on the objects its
words name."""

from keras_attn import _serializables
from keras_attn.vision.grounding import (
    NounAttention,
    noun_objects,
    object_attention,
    summarize_object_attention,
)
from keras_attn.vision.questions import (
    ANSWERS,
    QUESTION_TYPES,
    QUESTION_WORDS,
    SceneQuestion,
    asked_regions,
    generate_questions,
    question_splits,
)
from keras_attn.vision.scenes import (
    CAPTION_WORDS,
    COLOURS,
    HELD_OUT_PAIRS,
    MAX_CAPTION_WORDS,
    RELATIONS,
    SHAPES,
    SIZES,
    SPLITS,
    ParsedCaption,
    Scene,
    SceneObject,
    caption_ids,
    encode_png,
    generate_scene,
    mask_to_grid,
    parse_caption,
    scene_splits,
)

__all__ = [
    "ANSWERS",
    "QUESTION_TYPES",
    "QUESTION_WORDS",
    "SceneQuestion",
    "asked_regions",
    "generate_questions",
    "question_splits",
    "CAPTION_WORDS",
    "COLOURS",
    "HELD_OUT_PAIRS",
    "MAX_CAPTION_WORDS",
    "NounAttention",
    "RELATIONS",
    "SHAPES",
    "SIZES",
    "SPLITS",
    "ParsedCaption",
    "Scene",
    "SceneObject",
    "caption_ids",
    "encode_png",
    "generate_scene",
    "mask_to_grid",
    "noun_objects",
    "object_attention",
    "parse_caption",
    "scene_splits",
    "summarize_object_attention",
]

_serializables.imported(__name__)
