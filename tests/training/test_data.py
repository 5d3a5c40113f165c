import numpy as np
import pytest

from keras_attn.text.tokenizer import WordPieceTokenizer
from keras_attn.training.data import BatchPlan, pad, tokenize_sentences


def make_examples(n=103, seed=0):
    rng = np.random.default_rng(seed)
    sources = [rng.integers(4, 50, rng.integers(1, 12)).astype(np.int32) for _ in range(n)]
    targets = [
        np.array([2, *rng.integers(4, 50, rng.integers(1, 15)), 3], np.int32) for _ in range(n)
    ]
    return sources, targets


def test_pad():
    out = pad([np.array([1, 2]), np.array([3])])
    np.testing.assert_array_equal(out, [[1, 2], [3, 0]])


def test_plan_is_a_pure_function_of_seed_and_step():
    sources, targets = make_examples()
    a = BatchPlan(sources, targets, batch_size=8, seed=5, pool_batches=3)
    b = BatchPlan(sources, targets, batch_size=8, seed=5, pool_batches=3)
    order = [a.indices(s).tolist() for s in range(30)]
    # b visits the steps out of order (as a resumed run does) and must agree
    assert [b.indices(s).tolist() for s in reversed(range(30))][::-1] == order
    c = BatchPlan(sources, targets, batch_size=8, seed=6, pool_batches=3)
    assert [c.indices(s).tolist() for s in range(30)] != order


def test_each_pass_covers_distinct_examples():
    sources, targets = make_examples()
    plan = BatchPlan(sources, targets, batch_size=8, seed=0, pool_batches=3)
    assert plan.batches_per_epoch == 103 // 8
    seen = np.concatenate([plan.indices(s) for s in range(plan.batches_per_epoch)])
    assert len(seen) == len(set(seen.tolist())) == plan.batches_per_epoch * 8
    next_pass = np.concatenate(
        [plan.indices(s) for s in range(plan.batches_per_epoch, 2 * plan.batches_per_epoch)]
    )
    assert next_pass.tolist() != seen.tolist()


def test_batch_is_teacher_forced_and_padded():
    sources, targets = make_examples()
    plan = BatchPlan(sources, targets, batch_size=4, seed=0)
    features, labels = plan.batch(7)
    members = plan.indices(7)
    for row, index in enumerate(members):
        t = targets[index]
        np.testing.assert_array_equal(features["target_ids"][row, : len(t) - 1], t[:-1])
        np.testing.assert_array_equal(labels[row, : len(t) - 1], t[1:])
        assert np.all(labels[row, len(t) - 1 :] == 0)
        np.testing.assert_array_equal(
            features["source_ids"][row, : len(sources[index])], sources[index]
        )


def test_language_model_batches_are_the_sentences_shifted_by_one():
    sources, targets = make_examples()
    plan = BatchPlan(None, targets, batch_size=4, seed=0)
    lm_features, lm_labels = plan.batch(7)
    # Same order as the translation plan over the same targets; features = ids without END.
    translation_features, labels = BatchPlan(sources, targets, batch_size=4, seed=0).batch(7)
    np.testing.assert_array_equal(lm_features, translation_features["target_ids"])
    np.testing.assert_array_equal(lm_labels, labels)
    (features, batch_labels), *_ = plan.dataset(7, 8)
    assert plan.feature_spec.shape.as_list() == [None, None]
    np.testing.assert_array_equal(features.numpy(), lm_features)
    np.testing.assert_array_equal(batch_labels.numpy(), lm_labels)


def test_tokenize_sentences_wraps_in_start_end_and_drops_long_or_empty():
    tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[START]", "[END]", "a", "b", "c"])
    out = tokenize_sentences(["a b", "", "a b c", "c"], tokenizer, max_length=2)
    assert [o.tolist() for o in out] == [[2, 4, 5, 3], [2, 6, 3]]
    assert all(o.dtype == np.int32 for o in out)


def test_dataset_resumes_at_the_same_position():
    sources, targets = make_examples()
    plan = BatchPlan(sources, targets, batch_size=8, seed=1)
    full = [labels.numpy() for _, labels in plan.dataset(0, 6)]
    resumed = [labels.numpy() for _, labels in plan.dataset(4, 6)]
    for a, b in zip(full[4:], resumed, strict=True):
        np.testing.assert_array_equal(a, b)


def test_too_few_examples():
    sources, targets = make_examples(3)
    with pytest.raises(ValueError, match="at least one batch"):
        BatchPlan(sources, targets, batch_size=8)
