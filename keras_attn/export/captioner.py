"""The served image captioner: image bytes in, caption and attention maps out, in one graph."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf

from keras_attn.errors import ConfigError
from keras_attn.export._decoded import ConfiguredSearch, check_decoder, string_outputs, trim_ids
from keras_attn.export.contract import captioner_signatures, check_captioner_saved_model
from keras_attn.export.saved_model import _publish
from keras_attn.vision.scenes import MAX_CAPTION_WORDS, encode_png, generate_scene

IMAGE_SPEC = tf.TensorSpec([None], tf.string, name="image")
# The longest caption of the scene grammar and its END token.
MAX_CAPTION_TOKENS = MAX_CAPTION_WORDS + 1


def decode_images(image, image_shape: tuple[int, int]):
    """PNG/JPEG bytes `[batch]` → uint8 `(batch, H, W, 3)`, in the graph: `tf.io.decode_image`
    (3 channels), and an image of another size than `image_shape = (H, W)` resized to it
    (bilinear with antialiasing)."""
    height, width = image_shape

    def decode(data):
        decoded = tf.io.decode_image(data, channels=3, expand_animations=False)
        same_size = tf.reduce_all(tf.equal(tf.shape(decoded)[:2], [height, width]))

        def resized():
            pixels = tf.image.resize(decoded, (height, width), antialias=True)
            return tf.cast(tf.round(tf.clip_by_value(pixels, 0.0, 255.0)), tf.uint8)

        return tf.reshape(tf.cond(same_size, lambda: decoded, resized), (height, width, 3))

    signature = tf.TensorSpec((height, width, 3), tf.uint8)
    return tf.map_fn(decode, image, fn_output_signature=signature)


class Captioner(ConfiguredSearch, tf.Module):
    """Image bytes in, captions out: the path the exported signatures wrap.

    image `[batch]` PNG or JPEG bytes → `tf.io.decode_image` (3 channels; an image of another
    size is resized to the model's `(H, W)`, bilinear with antialiasing) → uint8
    `(batch, H, W, 3)` → `steps.encode` → `greedy_search` or `beam_search` over `steps.step` →
    ids → detokenizer → caption strings.

    `caption` (a `tf.function` with a fixed input signature) returns `caption` `[batch]` string,
    `tokens` `[batch, T_out]` string (padded with ""), `scores` `[batch]` float32 (the sum of the
    log-probabilities of the returned words, END included; never length-normalised) and
    `attention` `[batch, T_out, H', W']` float32: the region weights of the step that emitted
    each word, laid out like the image's `H' x W'` grid of regions (soft attention: `alpha_t`;
    hard attention: the one region it reads). Rows past a caption's end are zeros.
    `caption_pixels` is the same on uint8 `(batch, H, W, 3)` images (in-process evaluation).

    Args:
        model: a `keras_attn.models.show_attend_tell` model (tracked so that the
            SavedModel holds its variables).
        steps: its `keras_attn.models.ShowAttendTellSteps`.
        tokenizer: the caption `keras_attn.text.tokenizer.WordPieceTokenizer`.
        max_output_length: the most tokens generated per caption, END included.
        decoder: `"greedy"` or `"beam"`.
        beam_size: hypotheses kept per image by the beam decoder.
        length_penalty: the GNMT alpha the beam decoder ranks with (`beam_search`).

    Raises:
        keras_attn.errors.ConfigError: an unknown `decoder`, a `beam_size` below 1 or a
            `max_output_length` below 1.

    References:
        Xu et al., 2015, "Show, Attend and Tell", arXiv:1502.03044.
    """

    def __init__(
        self,
        model,
        steps,
        tokenizer,
        max_output_length: int = MAX_CAPTION_TOKENS,
        decoder: str = "greedy",
        beam_size: int = 4,
        length_penalty: float = 0.6,
        name: str = "captioner",
    ):
        super().__init__(name=name)
        check_decoder(decoder)
        if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size < 1:
            raise ConfigError(
                f"Expected beam_size >= 1. Received: beam_size={beam_size!r}", ["beam_size"]
            )
        if isinstance(max_output_length, bool) or int(max_output_length) < 1:
            raise ConfigError(
                "Expected max_output_length >= 1. Received: "
                f"max_output_length={max_output_length!r}",
                ["max_output_length"],
            )
        self.model = model
        self._steps = steps
        self.tokenizer = tokenizer
        self.image_shape = tuple(int(side) for side in model.input["images"].shape[1:3])
        self.grid_shape = tuple(int(side) for side in steps.grid_shape)
        self.max_output_length = int(max_output_length)
        self.decoder = decoder
        self.beam_size = beam_size
        self.length_penalty = float(length_penalty)
        pixels = tf.TensorSpec([None, *self.image_shape, 3], tf.uint8, name="images")
        self.caption_pixels = tf.function(self._caption, input_signature=[pixels], autograph=False)

    def decode_images(self, image):
        """PNG/JPEG bytes `[batch]` → uint8 `(batch, H, W, 3)` at the model's size."""
        return decode_images(image, self.image_shape)

    def _caption(self, images):
        batch_size = tf.shape(images)[0]
        state = self._steps.encode(images)
        result = self._run_search(state, batch_size, self.tokenizer, self.max_output_length)
        ids, lengths, width = trim_ids(result, self.tokenizer.pad_id)
        outputs = string_outputs("caption", self.tokenizer, ids, result.scores)
        # The words' steps only (not a shorter caption's END): (batch, T_out, L)
        words = tf.sequence_mask(lengths, width, tf.float32)[:, :, None]
        attention = tf.cast(result.alignments[:, :width, :], tf.float32) * words
        # (batch, T_out, L) -> (batch, T_out, H', W'), regions in row-major order
        outputs["attention"] = tf.reshape(attention, [batch_size, width, *self.grid_shape])
        return outputs

    @tf.function(input_signature=[IMAGE_SPEC], autograph=False)
    def caption(self, image):
        return self._caption(self.decode_images(image))


def sample_images(image_size: int, seed: int = 0) -> list[bytes]:
    """Three encoded scenes for checks and warm-up: two PNGs at `image_size` and a JPEG of
    another size (which the captioner resizes)."""
    rng = np.random.default_rng(seed)
    pngs = [encode_png(generate_scene(rng, image_size).image) for _ in range(2)]
    larger = generate_scene(rng, image_size + 16).image
    return [*pngs, tf.io.encode_jpeg(larger, quality=95).numpy()]


def captioner_warmup_feeds(images: Sequence[bytes], grid_shape: tuple[int, int]) -> dict:
    """Feeds for every captioner signature: input `image`, DT_STRING `[len(images)]`."""
    image = np.array(list(images), dtype=object)
    return {signature: {"image": image} for signature in captioner_signatures(grid_shape)}


def export_captioner(
    captioner: Captioner,
    model_base_path: str | os.PathLike,
    version: int | None = None,
    check: bool = True,
    images: Sequence[bytes] | None = None,
) -> Path:
    """Export `captioner` as `model_base_path/<version>/` with the serving signatures.

    Signatures `serving_default` and `caption`: `image` DT_STRING `[-1]` (PNG or JPEG bytes) →
    `caption`, `tokens`, `scores` and `attention` `[-1, -1, H', W']`. The version is written to a
    hidden temporary directory with one warm-up request per signature on `images`, checked by
    `check_captioner_saved_model` (a separate process importing only tensorflow and
    tensorflow_text captions `images`) and only then renamed to its version number, as
    `keras_attn.export.saved_model.export_translator` publishes a translator.

    Args:
        captioner: the `Captioner` to export.
        model_base_path: the model's base directory (created if needed).
        version: integer version; default: one more than the newest existing version (or 1).
        check: run the contract check before publishing.
        images: encoded images for the warm-up requests and the check (default:
            `sample_images` at the model's size).

    Returns:
        The version directory.

    Raises:
        keras_attn.errors.PathExistsError: the version exists already.
        keras_attn.errors.ConfigError: a non-positive version.
        keras_attn.export.contract.ContractError: the check failed (nothing is published).
    """
    if images is None:
        images = sample_images(captioner.image_shape[0])
    images = list(images)
    endpoints = {"serving_default": captioner.caption, "caption": captioner.caption}
    grid_shape = captioner.grid_shape
    warmup = captioner_warmup_feeds(images, grid_shape)

    def contract(path):
        return check_captioner_saved_model(path, images, grid_shape)

    tracked = (captioner.model, captioner.tokenizer)
    return _publish(
        tracked,
        endpoints,
        model_base_path,
        version,
        contract if check else None,
        warmup,
        description=captioner.decoding_description(),
    )
