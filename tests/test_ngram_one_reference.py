"""The one-reference path of ``clipped_matches`` (one sort of hypothesis and reference n-grams
together) gives the integers of its general path (two counts and a binary search) at every order."""

import numpy as np
import pytest

from ragmeter.metrics.lexical import ngrams as NG


@pytest.mark.parametrize("seed", range(4))
def test_one_reference_path_equals_general_path(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    for trial in range(60):
        n, vocab = int(rng.integers(1, 40)), int(rng.integers(1, 8))
        segments = [[str(x) for x in rng.integers(0, vocab, size=int(rng.integers(0, 12)))] for _ in range(2 * n)]
        hyp = np.arange(0, 2 * n, 2)
        ref_pair = np.full(2 * n, -1)
        ref_pair[1::2] = np.arange(n)
        if trial % 3 == 0:  # a pair without a reference
            ref_pair[1] = -1
        assert NG._one_reference_each(hyp, ref_pair, n)
        for order in range(1, 5):
            fast = NG.clipped_matches(NG.NgramColumns(segments, 4), hyp, ref_pair, order)
            with monkeypatch.context() as m:
                m.setattr(NG, "_one_reference_each", lambda *a: False)
                general = NG.clipped_matches(NG.NgramColumns(segments, 4), hyp, ref_pair, order)
            assert fast.dtype == general.dtype and fast.tolist() == general.tolist()


def test_two_references_take_the_general_path():
    ref_pair = np.array([-1, 0, 0])
    assert not NG._one_reference_each(np.array([0]), ref_pair, 1)
    grams = NG.NgramColumns([["a", "a", "b"], ["a"], ["a", "a"]], 1)
    assert NG.clipped_matches(grams, np.array([0]), ref_pair, 1).tolist() == [2]
