"""LCS and shingle metrics against values computed by hand on tiny strings."""

import pytest

from scrapy_grownup.evaluation.metrics import (
    harmonic_mean, lcs_f1, lcs_scores, matched_tokens, shingle_counts, shingle_f1, shingle_scores,
    shingles, tokens, word_tokens, bag_of_words_f1, bag_of_words_scores,
)


def test_tokens_split_on_any_whitespace():
    assert tokens("  a\tb\n\nc\u00a0d ") == ["a", "b", "c", "d"]
    assert tokens("") == [] and tokens(None) == []


def test_word_tokens_drop_punctuation_and_keep_case():
    assert word_tokens("Hello, World! it's") == ["Hello", "World", "it", "s"]
    assert word_tokens("Hello, World!", lowercase=True) == ["hello", "world"]


def test_lcs_scores_by_hand():
    # "a" and "c d" match: 3 tokens of 4 on both sides.
    assert matched_tokens("a b c d".split(), "a c d e".split()) == 3
    assert lcs_scores("a b c d", "a c d e") == (0.75, 0.75)
    assert lcs_scores("a b", "a b c d") == (1.0, 0.5)
    assert lcs_scores("x a y b", "a b") == (0.5, 1.0)
    # Order matters: a subsequence, not a bag.
    assert lcs_scores("b a", "a b") == (0.5, 0.5)


def test_lcs_scores_empty_sides():
    assert lcs_scores("", "a b") == (1.0, 0.0)  # empty prediction: P = 1
    assert lcs_scores("a b", "") == (0.0, 1.0)  # empty gold: R = 1
    assert lcs_scores("", "") == (1.0, 1.0)
    assert lcs_scores("a", "b") == (0.0, 0.0)


def test_lcs_f1_is_harmonic_mean_of_averages_not_mean_of_page_f1():
    pairs = [("a b c d", "a c d e"), ("a", "a b c d")]  # (0.75, 0.75) and (1.0, 0.25)
    result = lcs_f1(pairs)
    assert result["pages"] == 2
    assert result["precision"] == pytest.approx(0.875)
    assert result["recall"] == pytest.approx(0.5)
    assert result["f1"] == pytest.approx(2 * 0.875 * 0.5 / 1.375)  # 0.63636...
    mean_page_f1 = (0.75 + 2 * 1.0 * 0.25 / 1.25) / 2  # 0.575
    assert result["f1"] != pytest.approx(mean_page_f1)


def test_lcs_f1_without_pages():
    assert lcs_f1([]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "pages": 0}


def test_harmonic_mean():
    assert harmonic_mean(0.5, 1.0) == pytest.approx(2 / 3)
    assert harmonic_mean(0.0, 0.0) == 0.0


def test_shingles_are_word_4grams_and_short_texts_one_shingle():
    assert shingles("a b c d e") == {("a", "b", "c", "d"): 1, ("b", "c", "d", "e"): 1}
    assert shingles("Hello, world!") == {("Hello", "world"): 1}
    assert shingles("") == {}
    assert shingles("a b c d a b c d")[("a", "b", "c", "d")] == 2


def test_shingle_scores_by_hand_case_sensitive():
    pred, gold = "The quick brown fox jumps", "the quick brown fox jumps over"
    # pred: (The quick brown fox), (quick brown fox jumps)
    # gold: (the quick brown fox), (quick brown fox jumps), (brown fox jumps over)
    # tp = 1, fp = 1, fn = 2, normalised by 4.
    assert shingle_counts(pred, gold) == (0.25, 0.25, 0.5)
    p, r, f1 = shingle_scores(pred, gold)
    assert (p, r) == (pytest.approx(0.5), pytest.approx(1 / 3))
    assert f1 == pytest.approx(0.4)
    # Lower-casing (an opt-in, not upstream): tp = 2, fp = 0, fn = 1.
    p, r, f1 = shingle_scores(pred, gold, lowercase=True)
    assert (p, r, f1) == (pytest.approx(1.0), pytest.approx(2 / 3), pytest.approx(0.8))


def test_shingle_scores_count_repeated_shingles_as_a_multiset():
    # pred shingles: abcd x2, bcda, cdab, dabc; gold: abcd -> tp 1, fp 4, fn 0.
    p, r, _ = shingle_scores("a b c d a b c d", "a b c d")
    assert (p, r) == (pytest.approx(0.2), pytest.approx(1.0))


def test_shingle_scores_punctuation_is_ignored():
    assert shingle_scores("Hello, world!", "Hello world") == (1.0, 1.0, 1.0)


def test_shingle_f1_aggregate_skips_pages_without_predicted_shingles_for_precision():
    pairs = [("", "a b c d"), ("a b c d", "a b c d")]
    result = shingle_f1(pairs)
    # Page 1 has tp + fp = 0: it counts for recall (0) but not for precision.
    assert result["precision"] == pytest.approx(1.0)
    assert result["recall"] == pytest.approx(0.5)
    assert result["f1"] == pytest.approx(2 / 3)
    assert result["mean_page_f1"] == pytest.approx(0.5)
    assert result["pages"] == 2


def test_shingle_f1_of_perfect_predictions_is_one():
    pairs = [("one two three four five", "one two three four five"), ("x", "x")]
    assert shingle_f1(pairs)["f1"] == pytest.approx(1.0)


def test_bag_of_words_metric():
    assert bag_of_words_scores("The cat sat.", "the CAT sat") == (1.0, 1.0, 1.0)
    p, r, f = bag_of_words_scores("a a b", "a b c d")
    assert (p, r) == (2 / 3, 0.5) and abs(f - 4 / 7) < 1e-12
    assert bag_of_words_scores("", "") == (1.0, 1.0, 1.0)
    assert bag_of_words_scores("", "x") == (0.0, 0.0, 0.0)
    agg = bag_of_words_f1([("a", "a"), ("", "b")])
    assert agg == {"precision": 0.5, "recall": 0.5, "f1": 0.5, "pages": 2}
