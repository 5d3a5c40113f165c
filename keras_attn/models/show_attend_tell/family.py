"""The `show-attend-tell` family: an image captioner with soft or hard attention."""

from __future__ import annotations

from keras_attn.models.family import Family
from keras_attn.models.show_attend_tell.model import show_attend_tell
from keras_attn.models.show_attend_tell.options import ShowAttendTellOptions
from keras_attn.models.show_attend_tell.steps import ShowAttendTellSteps

SHOW_ATTEND_TELL = Family(
    build=show_attend_tell,
    steps=ShowAttendTellSteps,
    options=ShowAttendTellOptions,
    task="captioning",
)
