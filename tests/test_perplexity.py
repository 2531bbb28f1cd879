"""completion_perplexity: exact values where they are known, and its input checks."""

import numpy as np
import pytest

from bnpzoo.metrics import completion_perplexity

VOCAB = ["a", "b", "c", "d"]


def test_uniform_topics_give_the_vocabulary_size():
    docs = [["a", "b", "c", "d", "a"], ["d", "d", "c"]]
    assert completion_perplexity(np.full((3, 4), 0.25), VOCAB, docs) == pytest.approx(4.0)


def test_one_topic_scores_the_odd_tokens_by_their_probabilities():
    phi = np.array([[0.1, 0.2, 0.3, 0.4]])
    docs = [["a", "b", "c", "d"], ["d", "c", "b"]]  # odd positions: b, d | c
    expected = np.exp(-np.mean(np.log([0.2, 0.4, 0.3])))
    assert completion_perplexity(phi, VOCAB, docs) == pytest.approx(expected)


def test_fold_in_finds_the_topic_of_each_document():
    """Two topics on disjoint halves of the vocabulary: a document from one topic is scored
    as if the other did not exist, up to the smoothing's share."""
    phi = np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5]])
    docs = [["a", "b"] * 20, ["c", "d", "d", "c"] * 10]
    value = completion_perplexity(phi, VOCAB, docs, smoothing=1e-3)
    assert value == pytest.approx(2.0, rel=1e-3)
    # a fixed 50:50 mixture would score 4
    assert completion_perplexity(phi, VOCAB, docs, iterations=0) == pytest.approx(4.0)


def test_tokens_outside_the_vocabulary_are_dropped_before_the_split():
    phi = np.array([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])
    docs = [["a", "b", "c", "d", "a", "c"], ["b", "d", "d"]]
    noisy = [["zz", "a", "b", "qq", "c", "d", "a", "c", "zz"], ["b", "?", "d", "d"]]
    assert completion_perplexity(phi, VOCAB, noisy) == pytest.approx(completion_perplexity(phi, VOCAB, docs))


def test_a_token_with_zero_probability_gives_infinity():
    phi = np.array([[0.5, 0.5, 0.0, 0.0]])
    assert completion_perplexity(phi, VOCAB, [["a", "c"]]) == np.inf


@pytest.mark.parametrize("topic_word, vocab, docs, match", [
    (np.full((2, 3), 1 / 3), VOCAB, [["a", "b"]], "vocab has 4 tokens"),
    (np.full((2, 4), 0.3), VOCAB, [["a", "b"]], "sum to 1"),
    (np.array([[1.5, -0.5, 0, 0]]), VOCAB, [["a", "b"]], "non-negative"),
    (np.full(4, 0.25), VOCAB, [["a", "b"]], "K x V"),
    (np.full((1, 4), 0.25), ["a", "a", "c", "d"], [["a", "b"]], "duplicate"),
    (np.full((1, 4), 0.25), VOCAB, [["a"], ["zz", "b"]], "no held-out tokens"),
    (np.full((1, 4), 0.25), VOCAB, ["a b c"], "list of tokens"),
])
def test_bad_input_is_named(topic_word, vocab, docs, match):
    with pytest.raises(ValueError, match=match):
        completion_perplexity(topic_word, vocab, docs)
