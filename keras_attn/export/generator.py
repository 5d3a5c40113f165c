"""The served GPT language model: prompt strings in, continuation strings out, in one graph."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from keras_attn.decoding import DecodingResult, sample
from keras_attn.errors import ConfigError
from keras_attn.export import buckets
from keras_attn.export._decoded import string_outputs, trim_ids

PROMPT_SPEC = tf.TensorSpec([None], tf.string, name="prompt")
OPTION_SPECS = (
    tf.TensorSpec([], tf.int32, name="max_length"),
    tf.TensorSpec([], tf.float32, name="temperature"),
    tf.TensorSpec([], tf.int32, name="top_k"),
    tf.TensorSpec([], tf.float32, name="top_p"),
)


class Generator(tf.Module):
    """Continue prompts with a language model: the path of the exported `generate` signatures.

    prompt `[batch]` → tokenizer → ids, START prepended, the last `max_prompt_length` kept →
    `steps.prefill` → `keras_attn.decoding.sample` over `steps.step` (temperature 0 = greedy) →
    ids → detokenizer → continuation strings.

    Signatures (methods, each a `tf.function` with a fixed input signature):
    - `generate(prompt)`: greedy continuation of at most `max_output_length` tokens.
    - `generate_with_options(prompt, max_length, temperature, top_k, top_p)`: scalar options;
      `max_length` is capped by `max_output_length`, `temperature <= 0` is greedy, `top_k = 0`
      and `top_p = 1` disable those filters; draws use a fresh seed per call.

    Both return `continuation` `[batch]` string, `tokens` `[batch, L]` string (padded with "")
    and `scores` `[batch]` float32 (sum of the model's log-probabilities of the tokens, END
    included when produced).

    Args:
        model: the language model, e.g. a GPT (tracked so the SavedModel holds its variables).
        steps: its step view, e.g. a `keras_attn.models.GPTSteps` over `model`, whose cache
            must hold `max_prompt_length + 1 + max_output_length` slots (its `max_length`), or
            a `keras_attn.models.RNNLMSteps`, which has no such limit.
        tokenizer: a `keras_attn.text.tokenizer.WordPieceTokenizer`.
        max_prompt_length: prompt tokens kept (the last ones), START not counted.
        max_output_length: the most tokens generated, END included.
        jit_compile: run the prefill and the sampling loop as one XLA-compiled function
            (`tf.function(jit_compile=True)`) on prompt ids padded to a shape bucket
            (`keras_attn.export.buckets`), the outputs cut back: `generate` returns what the
            uncompiled generator returns.
        batch_buckets: the batch sizes compiled for (`jit_compile` only; default
            `buckets.DEFAULT_BATCH_BUCKETS`); a larger batch fails with `InvalidArgumentError`.
        length_buckets: the prompt widths compiled for, START included (`jit_compile` only;
            default `buckets.default_length_buckets(max_prompt_length + 1)`);
            `max_prompt_length + 1` is always the last.
    """

    def __init__(
        self,
        model,
        steps,
        tokenizer,
        max_prompt_length: int = 64,
        max_output_length: int = 64,
        jit_compile: bool = False,
        batch_buckets: Sequence[int] | None = None,
        length_buckets: Sequence[int] | None = None,
        name: str = "generator",
    ):
        super().__init__(name=name)
        needed = max_prompt_length + 1 + max_output_length
        if needed > getattr(steps, "max_length", needed):  # a step view without a length limit
            raise ConfigError(
                f"max_prompt_length + 1 + max_output_length = {needed} exceeds the cache of "
                f"{steps.max_length} slots (GPTSteps max_length)",
                ["max_prompt_length", "max_output_length"],
            )
        self.model = model
        self._steps = steps
        self.tokenizer = tokenizer
        self.max_prompt_length = int(max_prompt_length)
        self.max_output_length = int(max_output_length)
        self.jit_compile = bool(jit_compile)
        self.batch_buckets, self.length_buckets = buckets.validated(
            jit_compile, batch_buckets, length_buckets, self.max_prompt_length + 1
        )
        if self.jit_compile:
            self._compiled_sample = buckets.compile_padded(
                self._sample, *OPTION_SPECS, tf.TensorSpec([], tf.int64)
            )

    def _prompt_ids(self, prompt):
        ragged = self.tokenizer.tokenize(prompt)[:, -self.max_prompt_length :]
        start = tf.fill([tf.shape(prompt)[0], 1], tf.cast(self.tokenizer.start_id, ragged.dtype))
        ids = tf.concat([start, ragged], axis=1)  # never empty: START first
        return tf.cast(ids.to_tensor(default_value=self.tokenizer.pad_id), tf.int32)

    def _generate(self, prompt, max_length, temperature, top_k, top_p):
        prompt_ids = self._prompt_ids(prompt)
        max_length = tf.clip_by_value(max_length, 1, self.max_output_length)
        if self.jit_compile:
            batch_size = tf.shape(prompt_ids)[0]
            padded = buckets.pad_to_buckets(
                prompt_ids, self.batch_buckets, self.length_buckets, self.tokenizer.pad_id
            )
            seed = tf.random.uniform([], maxval=tf.int64.max, dtype=tf.int64)
            result = self._compiled_sample(padded, max_length, temperature, top_k, top_p, seed)
            result = DecodingResult(*(field[:batch_size] for field in result[:3]), None)
        else:
            result = self._sample(prompt_ids, max_length, temperature, top_k, top_p, None)
        ids, _, _ = trim_ids(result, self.tokenizer.pad_id)
        return string_outputs("continuation", self.tokenizer, ids, result.scores)

    def _sample(self, prompt_ids, max_length, temperature, top_k, top_p, seed):
        """Prefill `prompt_ids` and sample at most `max_length` tokens (a fresh seed for None).

        Compiled, the outputs have `max_output_length` columns whatever `max_length` is, so
        one executable serves every limit.
        """
        limit = {"max_length": max_length}
        if self.jit_compile:
            limit = {"max_length": self.max_output_length, "length_limit": max_length}
        return sample(
            self._steps.step,
            self._steps.prefill(prompt_ids),
            tf.shape(prompt_ids)[0],
            start_id=self.tokenizer.start_id,
            end_id=self.tokenizer.end_id,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            seed=seed,
            pad_id=self.tokenizer.pad_id,
            **limit,
        )

    @tf.function(input_signature=[PROMPT_SPEC], autograph=False)
    def generate(self, prompt):
        return self._generate(prompt, self.max_output_length, 0.0, 0, 1.0)

    @tf.function(input_signature=[PROMPT_SPEC, *OPTION_SPECS], autograph=False)
    def generate_with_options(self, prompt, max_length, temperature, top_k, top_p):
        return self._generate(prompt, max_length, temperature, top_k, top_p)
