import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.decoding import filter_logits, greedy_search, sample
from keras_attn.decoding.sampling import threefry2x32, uniform_noise
from tests.decoding.scripted_models import END, START, prefix_state, prefix_step, random_table
from tests.lazy_tf import tf

pytestmark = pytest.mark.every_backend

PAD = 0
VOCAB = 10
# Logits over 10 tokens; PAD (0) and START (2) are never drawn, so 8 tokens compete.
LOGITS = np.log(np.array([0.2, 0.04, 0.1, 0.01, 0.3, 0.15, 0.08, 0.06, 0.035, 0.025], "float32"))


def allowed_probabilities(logits=LOGITS):
    p = np.exp(logits.astype(np.float64))
    p[[PAD, START]] = 0.0
    return p / p.sum()


def constant_step(tokens, state):
    return ops.tile(ops.convert_to_tensor(LOGITS)[None], [ops.shape(tokens)[0], 1]), state


def numpy(x):
    return ops.convert_to_numpy(x)


def draws(n, seed=7, **kwargs):
    """n independent first tokens (one sentence per draw)."""
    result = sample(constant_step, {}, n, START, END, 1, seed=seed, **kwargs)
    return numpy(result.ids)[:, 0]


def chi_square_critical(df, z=4.753):
    """Wilson-Hilferty approximation of the chi-square quantile for a standard-normal z (1e-6)."""
    return df * (1 - 2 / (9 * df) + z * np.sqrt(2 / (9 * df))) ** 3


def assert_frequencies_match(tokens, expected):
    """Chi-square goodness of fit; false alarm probability about 1e-6 (seeded: deterministic)."""
    support = expected > 0
    counts = np.bincount(tokens, minlength=VOCAB)
    assert counts[~support].sum() == 0, f"drawn outside the support: {counts}"
    n = len(tokens)
    statistic = ((counts[support] - n * expected[support]) ** 2 / (n * expected[support])).sum()
    assert statistic < chi_square_critical(support.sum() - 1), (statistic, counts)


def test_frequencies_match_the_softmax():
    assert_frequencies_match(draws(20000), allowed_probabilities())


def test_temperature_sharpens_like_the_softmax_of_scaled_logits():
    assert_frequencies_match(draws(20000, temperature=0.5), allowed_probabilities(LOGITS / 0.5))


def test_top_k_never_leaves_the_top_k_and_renormalises():
    # Allowed tokens by probability: 4 (0.3), 0 is PAD, 5 (0.15), 6 (0.08), 7 (0.06), 1, 8, 9, 3.
    expected = allowed_probabilities()
    expected[np.argsort(-expected)[3:]] = 0.0
    assert set(np.flatnonzero(expected)) == {4, 5, 6}
    assert_frequencies_match(draws(20000, top_k=3), expected / expected.sum())


def test_top_p_never_leaves_the_nucleus_and_renormalises():
    probabilities = allowed_probabilities()  # 4: .3/.74 = .405, 5: .203, 6: .108, 7: .081 ...
    order = np.argsort(-probabilities)
    mass_before = np.cumsum(probabilities[order]) - probabilities[order]
    nucleus = order[mass_before < 0.7]
    assert set(nucleus) == {4, 5, 6}  # .405 + .203 = .608 < .7, then 6 reaches .716
    expected = np.zeros(VOCAB)
    expected[nucleus] = probabilities[nucleus]
    assert_frequencies_match(draws(20000, top_p=0.7), expected / expected.sum())


def test_filters_compose_in_order_temperature_top_k_top_p():
    kept = numpy(filter_logits(LOGITS[None], temperature=2.0, top_k=4, top_p=0.6))[0]
    scaled = LOGITS / 2.0
    top4 = np.argsort(-scaled)[:4]  # 4, 0, 5, 2 (PAD and START are not masked here)
    p = np.exp(scaled[top4] - scaled[top4].max())
    p /= p.sum()
    keep = top4[(np.cumsum(p) - p) < 0.6]
    np.testing.assert_allclose(kept[keep], scaled[keep], rtol=1e-6)
    assert np.all(np.isneginf(np.delete(kept, keep)))
    assert len(keep) < 4  # top-p did cut inside the top-k set


def test_temperature_zero_and_tiny_equal_greedy():
    table = random_table(3, 5, seed=11)
    step, state = prefix_step(table, 5), prefix_state(3, 5)
    greedy = greedy_search(step, state, 3, START, END, 5)
    for temperature in (0.0, 1e-4):
        result = sample(step, state, 3, START, END, 5, temperature=temperature, seed=3)
        np.testing.assert_array_equal(numpy(result.ids), numpy(greedy.ids))
        np.testing.assert_allclose(numpy(result.scores), numpy(greedy.scores), rtol=1e-6)
        np.testing.assert_allclose(numpy(result.alignments), numpy(greedy.alignments))


def test_scores_are_the_model_log_probabilities_of_the_drawn_tokens():
    result = sample(constant_step, {}, 500, START, END, 3, temperature=3.0, top_k=5, seed=1)
    ids, lengths, scores = numpy(result.ids), numpy(result.lengths), numpy(result.scores)
    log_probs = LOGITS - np.log(np.exp(LOGITS).sum())
    for row in range(500):
        generated = ids[row, : min(lengths[row] + 1, 3)]
        np.testing.assert_allclose(scores[row], log_probs[generated].sum(), rtol=1e-5)
        assert not {PAD, START} & set(generated.tolist())


def _sampler():
    """What an exported `generate` signature does: sampling knobs and the seed are inputs
    (a `tf.Module`, defined here: the module imports no TensorFlow)."""
    signature = [
        tf.TensorSpec([], tf.float32, name="temperature"),
        tf.TensorSpec([], tf.int32, name="top_k"),
        tf.TensorSpec([], tf.float32, name="top_p"),
        tf.TensorSpec([], tf.int64, name="seed"),
    ]

    class Sampler(tf.Module):
        def __init__(self):
            super().__init__()
            self.seed_generator = keras.random.SeedGenerator(5)
            self.seed_state = self.seed_generator.state  # tracked, so it is saved and advances

        @tf.function(input_signature=signature)
        def seeded(self, temperature, top_k, top_p, seed):
            return sample(constant_step, {}, 64, START, END, 4, temperature, top_k, top_p, seed).ids

        @tf.function(input_signature=[])
        def unseeded(self):
            return sample(constant_step, {}, 64, START, END, 4).ids

        @tf.function(input_signature=[])
        def from_generator(self):
            return sample(constant_step, {}, 64, START, END, 4, seed=self.seed_generator).ids

    return Sampler()


@pytest.fixture(scope="module")
def exported_sampler(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("sampler"))
    module = _sampler()
    tf.saved_model.save(module, path)
    return tf.saved_model.load(path)


@pytest.mark.tensorflow_only
def test_exported_sampler_is_reproducible_with_a_seed_and_varies_without(exported_sampler):
    knobs = (tf.constant(1.0), tf.constant(0), tf.constant(1.0))
    first = ops.convert_to_numpy(exported_sampler.seeded(*knobs, tf.constant(42, tf.int64)))
    np.testing.assert_array_equal(
        first, ops.convert_to_numpy(exported_sampler.seeded(*knobs, tf.constant(42, tf.int64)))
    )
    assert not np.array_equal(first, exported_sampler.seeded(*knobs, tf.constant(43, tf.int64)))
    assert not np.array_equal(exported_sampler.unseeded(), exported_sampler.unseeded())
    assert not np.array_equal(exported_sampler.from_generator(), exported_sampler.from_generator())
    narrow = ops.convert_to_numpy(
        exported_sampler.seeded(
            tf.constant(0.7), tf.constant(2), tf.constant(0.9), tf.constant(1, tf.int64)
        )
    )
    assert set(np.unique(narrow)) <= {4, 5, PAD}  # the two most probable allowed tokens (+ PAD)


def test_same_int_seed_same_output_in_eager():
    np.testing.assert_array_equal(draws(100, seed=3), draws(100, seed=3))
    assert not np.array_equal(draws(100, seed=3), draws(100, seed=4))


def test_the_draws_of_a_seed_are_the_same_on_every_backend():
    """The tokens recorded under TensorFlow; the JAX run of this test draws them too."""
    assert draws(16, seed=3).tolist() == [4, 5, 6, 4, 5, 4, 7, 6, 4, 4, 4, 8, 9, 6, 6, 6]
    # a seed above 2**32 uses its high word as well
    assert draws(16, seed=2**40 + 3).tolist() == [4, 9, 6, 4, 5, 5, 4, 4, 4, 7, 5, 7, 4, 3, 4, 1]


def test_a_seed_generator_advances_and_replays():
    first = keras.random.SeedGenerator(9)
    again = keras.random.SeedGenerator(9)
    calls = [draws(100, seed=first) for _ in range(2)]
    assert not np.array_equal(*calls)
    np.testing.assert_array_equal(calls[0], draws(100, seed=again))


def test_without_a_seed_each_call_draws_anew():
    assert not np.array_equal(draws(100, seed=None), draws(100, seed=None))


# Known answers of Threefry-2x32 with 20 rounds: Random123's kat_vectors (Salmon et al., 2011),
# which jax.random's threefry2x32 also passes: (key, counter, output).
THREEFRY_ANSWERS = [
    ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


@pytest.mark.parametrize("key, counter, expected", THREEFRY_ANSWERS)
def test_threefry_gives_the_known_answers(key, counter, expected):
    words = [ops.convert_to_tensor(np.uint32(w), "uint32") for w in (*key, *counter)]
    output = threefry2x32(words[:2], words[2:])
    assert [int(numpy(word)) for word in output] == list(expected)


def test_uniform_noise_is_uniform_and_differs_by_step():
    key = [ops.convert_to_tensor(np.uint32(w), "uint32") for w in (5, 0)]
    first, second = (numpy(uniform_noise(key, step, (100, 100))) for step in (0, 1))
    assert 0.0 < first.min() and first.max() < 1.0
    counts = np.bincount((first.ravel() * 10).astype(int), minlength=10)
    assert ((counts - 1000) ** 2 / 1000).sum() < chi_square_critical(9)
    assert abs(np.corrcoef(first.ravel(), second.ravel())[0, 1]) < 0.02  # 5 sigma of 1e4 pairs


def test_compiled_draws_equal_eager_draws():
    """XLA (`jit_compile=True` under TensorFlow, `jax.jit` under JAX) draws the same tokens."""

    def run(seed):
        return sample(constant_step, {}, 64, START, END, 4, seed=seed).ids

    seed = ops.convert_to_tensor(11, "int32")
    np.testing.assert_array_equal(numpy(run(11)), numpy(run(seed)))
    if keras.backend.backend() == "tensorflow":
        compiled = tf.function(run, jit_compile=True)
    elif keras.backend.backend() == "jax":
        import jax

        compiled = jax.jit(run)
    else:
        pytest.skip(f"no XLA compilation under {keras.backend.backend()}")
    np.testing.assert_array_equal(numpy(compiled(seed)), numpy(run(seed)))
