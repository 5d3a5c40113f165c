"""The value every decoding strategy returns."""

from __future__ import annotations

from typing import Any, NamedTuple

from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.decoding.DecodingResult")
class DecodingResult(NamedTuple):
    """Output of a decoding strategy, batch-major.

    Attributes:
        ids: int32 `(batch, max_length)`: generated ids; the END token is kept where it was
            produced and every position after it holds the padding id.
        lengths: int32 `(batch,)`: number of generated tokens before END (END not counted).
        scores: float32 `(batch,)`: sum of the log-probabilities of the generated tokens, END
            included when it was produced (never length-normalised, also for beam search).
        alignments: float32 `(batch, max_length, T_x)` attention over the source at each step,
            or None when the model's state carries no `"attention"` entry.

    `beam_search(..., return_all_beams=True)` puts a beam axis after the batch in every field
    (`(batch, beam_size, ...)`), hypotheses best first.
    """

    ids: Any
    lengths: Any
    scores: Any
    alignments: Any
