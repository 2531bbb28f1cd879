"""Step 1 of the words' sampler on every core, the collapsed conditional against stale counts: the
approximate distributed sampler of the fast topic-model tools (AD-LDA: Newman, Asuncion, Smyth and
Welling 2009, "Distributed algorithms for topic models", JMLR 10; Mallet, Yahoo! LDA and tomotopy
do likewise).

The exact collapsed step (``compiled.document_labels``, ``document_moves``) reads, at every token,
the topic-word counts n_kw that every token before it changed: one sequential pass over the corpus.
Here the documents are cut into shares of about equal tokens, one a thread (and, across
``torchrun`` processes, one set of shares a process), and each share into rounds of about
``ROUND_TOKENS`` (``share_rounds``). At the start of a sweep every share takes its own copy of the
corpus's counts (n_kw, n_k); in each round it sweeps its round's documents exactly as the collapsed
step does, token by token with theta_d collapsed,

    p(z_di = k | .)  propto  (n_dk^-di + b D_t(k)) (n_kw^-di + beta) / (n_k^-di + V beta),

then their block moves and tables, keeping its copy up to date with its own changes; between two
rounds every copy takes the other shares' changes (``merge_changes``), so each round starts from
the counts of every label. Across processes the counts meet once a sweep (all-reduced). A share's
draws see the other shares' changes of the current round (of the sweep, across processes) only once
it ends: that is the approximation. With one share the sweep is the collapsed one, draw for draw.

New topics: an atom that holds no token is open to one share in a round (``_own_atoms``; one
process's shares in a sweep, across processes). Shares that open atoms at once open them for the
same words (neither sees the other's new topic) or put two topics' documents on one atom: on
enwiki, with every share opening any atom and the counts meeting once a sweep, held-out perplexity
was 5.9 % worse than the exact sampler's (two seeds; one of them with 37 % more topics).

Its stationary law is not the model's posterior, but close to it where a round's changes to a topic
are small against its counts; measured against the exact sampler at equal sweeps, two shares on
two cores (``benchmarks/reports/coupled_parallel.md``): enwiki 2,787 against 2,745, fine_foods
1,584 against 1,609 (two seeds each), within the seeds' spread (about 1 %). The exact steps
(collapsed, parallel) stay for the Geweke tests and as options; against the exact parallel step
(``parallel``, the topics drawn) the topics stay collapsed, so a word's tokens move to an atom that
holds none of them as readily as in the collapsed sampler. It costs a copy of the counts a share
(V K int32 each; the shares are fewer than the threads where the copies would take more than
``COPIES_MEMORY`` of the machine's memory) and a thread pool's round trip a round.

A share's draws come from numba's generator of its thread, seeded with (the sweep's seed + the
round's index times the shares + the share's), so a chain repeats under one seed and one number
of shares; the shares are as many as the threads (``parallel.threads``), so chains on other thread
counts draw differently (the exact steps do not).
"""

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from bnpzoo.inference.coupled.compiled import _document_labels, _document_moves, document_tables, row_cumsum

compiled_nogil = njit(cache=True, error_model="numpy", nogil=True)
MAX_SHARES = 1 << 12  # shares a process at most
ROUND_TOKENS = 16384  # tokens a share sweeps between two meetings of the counts (``share_rounds``)
SHARE_TOKENS = 2 * ROUND_TOKENS  # tokens a share holds at least: smaller corpora are swept by one (exact)
COPIES_MEMORY = 1 / 8  # the part of the machine's memory the shares' copies of the counts may take at most


def affordable_shares(vocab: int, atoms: int) -> int:
    """How many shares' copies of the counts (n_kw, V x K int32, and n_k) fit in ``COPIES_MEMORY`` of
    the machine's memory, at least one (16 copies of a 100,000-word vocabulary's counts over 300 atoms
    take 1.9 GB); ``MAX_SHARES`` where the memory cannot be read."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return MAX_SHARES
    return max(1, int(COPIES_MEMORY * memory) // (4 * vocab * atoms + 8 * atoms))


def share_rounds(document_starts: np.ndarray, count: int, round_tokens: int = ROUND_TOKENS,
                 share_tokens: int | None = None) -> np.ndarray:
    """(shares, rounds + 1): where each round of each share starts (document indices), its last
    column where the share ends. At most ``count`` shares of consecutive documents with about equal
    tokens, fewer where the documents are fewer or a share would hold less than ``share_tokens``
    (None: ``SHARE_TOKENS``)
    (on lee_background's 15,804 tokens two shares were no faster than one on two cores; on
    fine_foods' 80,666 and enwiki's 127,583 about 1.3 times, ``benchmarks/reports/coupled_parallel.md``),
    each cut into as many rounds of about ``round_tokens`` tokens as the largest share needs (one
    share: one round, the collapsed sweep)."""
    starts = np.asarray(document_starts, dtype=np.int64)
    share_tokens = SHARE_TOKENS if share_tokens is None else share_tokens
    count = max(1, min(count, MAX_SHARES, len(starts) - 1, starts[-1] // share_tokens))
    if count == 1:
        return np.asarray([[0, len(starts) - 1]], dtype=np.int64)
    bounds = np.searchsorted(starts, np.linspace(0, starts[-1], count + 1)[1:-1])
    bounds = np.unique(np.concatenate([[0], bounds, [len(starts) - 1]]))
    rounds = max(1, math.ceil(np.diff(starts[bounds]).max() / round_tokens))
    cuts = [np.searchsorted(starts, np.linspace(starts[lo], starts[hi], rounds + 1)[1:-1]).clip(lo, hi)
            for lo, hi in zip(bounds[:-1], bounds[1:])]
    return np.asarray([[lo, *cut, hi] for (lo, hi), cut in zip(zip(bounds[:-1], bounds[1:]), cuts)], dtype=np.int64)


@compiled_nogil
def sweep_share(corpus, z, counts, own, mixing, b, seed, copy):  # pragma: no cover (compiled)
    """One share's sweep (the module docstring): its documents' labels (``compiled.document_labels``),
    block moves (``compiled.document_moves``) and tables (``compiled.document_tables``, returned),
    drawn from numba's generator of the calling thread seeded with ``seed``. ``corpus`` = (x, groups,
    starts, V, beta), starts the share's documents'; ``counts`` = (n_kw word-major (V, K), n_k (K,))
    of every label of the corpus, copied into ``own`` (arrays of those shapes) where ``copy``, which
    the sweep keeps up to date with its own changes (one share: ``own`` is ``counts``, not copied,
    and the sweep is the collapsed one). Runs without the GIL, so shares run on threads of one
    process."""
    np.random.seed(seed)
    if copy:  # element by element: a slice assignment compiles numpy's broadcasting checks, 7 s on a first fit
        for k in range(counts[1].shape[0]):
            own[1][k] = counts[1][k]
        for w in range(counts[0].shape[0]):
            for k in range(counts[0].shape[1]):
                own[0][w, k] = counts[0][w, k]
    none = np.empty(0)  # no uniforms given: each drawn from the generator
    _document_labels(corpus, z, mixing, b, none, own)
    _document_moves(corpus, z, mixing, b, own, row_cumsum(mixing))
    return document_tables(corpus[1], corpus[2], z, mixing, b, none)


@compiled_nogil
def merge_changes(x, z, before, ranges, own):  # pragma: no cover (compiled)
    """The labels that changed (z against ``before``) on the tokens of ``ranges`` (rows lo, hi) moved
    in the counts ``own`` = (n_kw word-major, n_k): another share's round, into this share's copy."""
    nwk, nk = own
    for r in range(ranges.shape[0]):
        for i in range(ranges[r, 0], ranges[r, 1]):
            if z[i] != before[i]:
                nwk[x[i], before[i]] -= 1
                nk[before[i]] -= 1.0
                nwk[x[i], z[i]] += 1
                nk[z[i]] += 1.0


_POOL = {}  # threads -> the thread pool that sweeps the shares


def _on_threads(function, arguments: list) -> list:
    """``function`` on each argument tuple, one a thread of a pool kept for that many."""
    if len(arguments) == 1:
        return [function(*arguments[0])]
    pool = _POOL.get(len(arguments))
    if pool is None:
        pool = _POOL[len(arguments)] = ThreadPoolExecutor(len(arguments), thread_name_prefix="bnpzoo-share")
    return list(pool.map(lambda given: function(*given), arguments))


def _own_atoms(mixing: np.ndarray, own: tuple, share: int, opener: int) -> np.ndarray:
    """D_t as share ``share`` sees it in a round: the atoms that hold no token at the round's start
    (in ``own``, the counts as the round starts) are left to one share, the ``opener`` (the others,
    and every share where it is -1, see their mass as 0), so that two shares never open new atoms at
    once: they would open them for the same words (each sees the counts without the other's new
    topic) or open one atom with two topics' documents. Held-out perplexity, two seeds each, enwiki
    and fine_foods: this rule 2,787 and 1,584; every share opening its own part of the empty atoms
    2,805 and 1,580; the exact sampler 2,745 and 1,609; and with the counts meeting once a sweep,
    this rule 2,809 on enwiki, every share opening any atom 2,907 and 1,654."""
    if share == opener:
        return mixing
    return np.where((own[1] == 0)[None, :], 0.0, mixing)


def sweep_shares(corpus, z, counts, mixing, b, cuts, draws, own_counts) -> np.ndarray:
    """One sweep of step 1 over shares of documents, one a thread, in rounds (``share_rounds``' cuts):
    z (N,) is updated in place; returns the tables m_tk (T, K) of the documents swept. In round r,
    share p sweeps its documents cuts[p, r]:cuts[p, r + 1] on its copy of the counts, seeded with
    seed + r P + p, new atoms left to share (seed // P + r) mod P (``_own_atoms``; ``draws`` = (seed,
    whether this process's shares may open new atoms: one process at a time, across several)); then every copy
    takes the other shares' changes of the round, so that each round starts from the counts of every
    label. ``corpus`` as ``sweep_share`` takes it (starts every document's), ``counts`` every label's
    n_kw and n_k, ``own_counts`` = ((P, V, K), (P, K)) the shares' copies, written over, the counts
    left as they are (one share: None, and the share sweeps on the counts)."""
    x, groups, starts, vocab, beta = corpus
    (seed, opens), shares, rounds = draws, cuts.shape[0], cuts.shape[1] - 1
    own = [counts] if own_counts is None else [(own_counts[0][p], own_counts[1][p]) for p in range(shares)]
    before = z.copy() if rounds > 1 else z
    tables = 0.0
    for r in range(rounds):
        base = seed + r * shares
        opener = (base // shares) % shares if opens else -1
        ranges = [np.asarray([[starts[cuts[q, r - 1]], starts[cuts[q, r]]] for q in range(shares) if q != p and r > 0],
                             dtype=np.int64).reshape(-1, 2) for p in range(shares)]
        parts = [((x, groups, starts[cuts[p, r]:cuts[p, r + 1] + 1], vocab, beta), z, counts, own[p], mixing, b,
                  (base + p, p, opener, r == 0 and own_counts is not None), (before, ranges[p])) for p in range(shares)]
        tables = tables + sum(_on_threads(_share_round, parts))
    return tables


def _share_round(corpus, z, counts, own, mixing, b, draws, merged) -> np.ndarray:
    """A share's round (``sweep_shares``): the other shares' changes of the last round into its copy
    ``own`` (``merged`` = (z before the sweep, their tokens' ranges)), then its documents swept;
    ``draws`` = (seed, the share, the share that may open new atoms, whether to copy the counts first)."""
    seed, share, opener, copy = draws
    merge_changes(corpus[0], z, *merged, own)
    mixing = _own_atoms(mixing, counts if copy else own, share, opener)  # as the round starts
    return sweep_share(corpus, z, counts, own, mixing, b, seed, copy)
