"""The collapsed label step on every core against stale counts (``inference.coupled.approximate``):
with several shares, each share's draws are those of a sweep of its documents alone, from the counts
of every label at the sweep's start (one share is the collapsed step: ``test_coupled_gibbs``'s
joint-distribution tests run it)."""

import dataclasses
import os

import numpy as np
import pytest
import torch

from bnpzoo.inference.coupled import approximate, compiled, gibbs, parallel

VOCAB, ATOMS, GROUPS = 60, 12, 3


def _corpus(seed):
    """A random corpus of 2,000 tokens in 40 documents, random labels and group measures."""
    rng = np.random.default_rng(seed)
    n = 2_000
    starts = np.concatenate([[0], np.sort(rng.choice(np.arange(1, n), 39, replace=False)), [n]])
    groups = np.repeat(rng.integers(0, GROUPS, len(starts) - 1), np.diff(starts))
    corpus = (rng.integers(0, VOCAB, n), groups, starts, VOCAB, 0.1)
    return corpus, rng.integers(0, ATOMS, n), rng.dirichlet(np.full(ATOMS, 0.5), GROUPS)


def _sweep(corpus, z, mixing, cuts, seed, copies=True):
    """``approximate.sweep_shares`` with the shares and rounds ``cuts`` from the counts of z."""
    cuts = np.asarray(cuts)
    counts = compiled._word_counts(corpus[0], z, VOCAB, ATOMS)  # of every label, before the sweep
    own = (np.empty((len(cuts), VOCAB, ATOMS), dtype=np.int32), np.empty((len(cuts), ATOMS))) if copies else None
    return approximate.sweep_shares(corpus, z, counts, mixing, 0.7, cuts, (seed, True), own)


@pytest.mark.parametrize("seed", range(3))
def test_one_share_on_a_copy_is_one_share_on_the_counts(seed):
    corpus, z, mixing = _corpus(seed)
    copied, shared = z.copy(), z.copy()
    tables = _sweep(corpus, copied, mixing, [[0, 40]], seed)
    assert np.array_equal(_sweep(corpus, shared, mixing, [[0, 40]], seed, copies=False), tables)
    assert np.array_equal(shared, copied) and not np.array_equal(shared, z)


@pytest.mark.parametrize("seed", range(3))
def test_each_share_sweeps_its_documents_from_the_stale_counts(seed):
    """Shares [0, 17) and [17, 40) in one round: each one's labels and tables are those of sweeping
    it alone (seeded with the sweep's seed plus its index, the atoms empty at the start left to the
    same share) with the other's labels as they were when the sweep began."""
    corpus, z, mixing = _corpus(seed)
    together, first, second = z.copy(), z.copy(), z.copy()
    tables = _sweep(corpus, together, mixing, [[0, 17], [17, 40]], 4)
    cut = corpus[2][17]
    alone = [[0, 17], [17, 17]], [[0, 0], [17, 40]]  # the other share's round empty: the same seeds and opener
    parts = _sweep(corpus, first, mixing, alone[0], 4) + _sweep(corpus, second, mixing, alone[1], 4)
    assert np.array_equal(together[:cut], first[:cut]) and np.array_equal(together[cut:], second[cut:])
    assert np.array_equal(first[cut:], z[cut:]) and np.array_equal(second[:cut], z[:cut])
    assert np.array_equal(tables, parts)


@pytest.mark.parametrize("seed", range(3))
def test_each_round_starts_from_the_counts_of_every_label(seed):
    """Two shares in two rounds are two sweeps of one round each, the second from the counts of the
    labels the first left (its seed the first's plus the shares)."""
    corpus, z, mixing = _corpus(seed)
    together, apart = z.copy(), z.copy()
    tables = _sweep(corpus, together, mixing, [[0, 9, 17], [17, 30, 40]], 6)
    first = _sweep(corpus, apart, mixing, [[0, 9], [17, 30]], 6)
    assert np.array_equal(tables, first + _sweep(corpus, apart, mixing, [[9, 17], [30, 40]], 8))
    assert np.array_equal(together, apart)


def test_shares_hold_about_equal_tokens_in_rounds():
    starts = np.concatenate([[0], np.cumsum(np.random.default_rng(0).integers(1, 200, 500))])
    for count in (2, 3, 16):
        cuts = approximate.share_rounds(starts, count, round_tokens=10_000, share_tokens=1_000)
        assert cuts.shape[0] == count and cuts[0, 0] == 0 and cuts[-1, -1] == 500
        assert np.array_equal(cuts[1:, 0], cuts[:-1, -1]) and np.all(np.diff(cuts, axis=1) >= 0)
        tokens = np.diff(starts[cuts], axis=1)
        assert np.ptp(tokens.sum(1)) <= 2 * 200 and tokens.max() <= 10_000 + 200  # rounds of at most about 10,000
    assert np.array_equal(approximate.share_rounds(starts, 1), [[0, 500]])  # one share: the collapsed sweep
    assert approximate.share_rounds(np.array([0, 5, 9]), 8, share_tokens=1).shape[0] == 2  # no more than documents
    assert approximate.share_rounds(starts, 2, share_tokens=starts[-1] // 2 + 1).shape[0] == 1  # nor too small


def test_a_problem_sweeps_as_many_shares_as_threads(monkeypatch):
    monkeypatch.setattr(parallel, "threads", lambda: 3)
    monkeypatch.setattr(approximate, "SHARE_TOKENS", 50)
    words = torch.randint(0, 10, (300,))
    problem = gibbs.Problem(x=words, groups=torch.zeros(300, dtype=torch.long), q=torch.ones(1, 1),
                            atoms_per_source=4, vocab_size=10, documents=torch.arange(300) // 10,
                            label_step="approximate")
    assert len(problem.document_shares) == 3
    assert len(dataclasses.replace(problem, label_step="collapsed").document_shares) == 1
    (counts, totals), (copies, copy_totals) = problem.count_buffers, problem.share_copies
    assert counts.shape == (10, 4) and totals.shape == (4,) and copies.shape == (3, 10, 4) and copy_totals.shape == (3, 4)
    monkeypatch.setattr(approximate, "affordable_shares", lambda vocab, atoms: 2)  # copies for two fit in memory
    assert len(dataclasses.replace(problem).document_shares) == 2


def test_the_shares_copies_fit_in_their_part_of_the_memory():
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for vocab, atoms in ((100_000, 300), (10**6, 1_000), (10**9, 1_000)):
        shares = approximate.affordable_shares(vocab, atoms)
        copies = np.empty((1, 1, 1), dtype=np.int32).itemsize * vocab * atoms * shares
        assert shares >= 1 and (shares == 1 or copies <= approximate.COPIES_MEMORY * memory)
    assert approximate.affordable_shares(10**9, 1_000) == 1 < approximate.affordable_shares(10, 10)


def test_the_default_label_step_follows_the_threads_the_level_and_the_processes(monkeypatch):
    for threads, expected in ((2, "approximate"), (1, "collapsed")):
        monkeypatch.setattr(parallel, "threads", lambda: threads)
        assert gibbs.label_step(None).name == expected
        assert gibbs.label_step(None, documents=False).name == "collapsed"  # with its split-merge moves
        assert gibbs.label_step(None, data_parallel=True).name == "approximate"
        assert gibbs.label_step(None, data_parallel=True, documents=False).name == "parallel"
        assert gibbs.label_step(None, on_device=True).name == "uncollapsed"
        assert gibbs.label_step("parallel").name == "parallel"
