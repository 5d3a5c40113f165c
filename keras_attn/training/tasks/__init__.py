"""The training tasks of the model families (see `keras_attn.training.tasks.base.Task`)."""

from __future__ import annotations

from keras_attn.training.tasks.base import Task
from keras_attn.training.tasks.captioning import CaptioningTask
from keras_attn.training.tasks.classification import ClassificationTask, TaggingTask
from keras_attn.training.tasks.language_model import LanguageModelTask
from keras_attn.training.tasks.pretraining import DenoisingTask, MaskedLanguageModelTask
from keras_attn.training.tasks.question_answering import QuestionAnsweringTask
from keras_attn.training.tasks.translation import TranslationTask

TASKS: dict[str, Task] = {
    "translation": TranslationTask(),
    "language_model": LanguageModelTask(),
    "masked_lm": MaskedLanguageModelTask(),
    "denoising": DenoisingTask(),
    "classification": ClassificationTask(),
    "tagging": TaggingTask(),
    "captioning": CaptioningTask(),
    "question_answering": QuestionAnsweringTask(),
}


def get_task(name: str) -> Task:
    """The task called `name` (a `ModelFamily.task`)."""
    if name not in TASKS:
        raise ValueError(f"Unknown training task {name!r}. Expected one of: {', '.join(TASKS)}")
    return TASKS[name]
