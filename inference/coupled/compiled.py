"""Compiled inner loops of the coupled latent-DP Gibbs sampler (``inference.coupled.gibbs``).

Three of its loops are sequential by nature and run here under numba, on CPU arrays, and so does
the blocked label step, whose many small draws cost more in torch's per-call overhead than in
arithmetic (about 5x, ``benchmarks/reports/speed.md``). The caller passes torch-drawn
uniforms (or a torch-drawn seed of numba's generator), so runs are reproducible under
``pyro.set_rng_seed``.

``collapsed_log_likelihood``: ln p(x | z) with the topics integrated out, for the log joint.

``document_labels`` (step 1 with the document level): as ``collapsed_labels``, with each
document's own counts n_dk added to b D_t(k) (``inference.coupled.gibbs``); ``document_moves``
moves a document's tokens on one atom together, ``document_tables`` draws the tables, and
``document_log_likelihood`` scores the labels with theta_d integrated out; ``approximate.sweep_share``
runs the first three as one call on one count of z (what the sampler runs).

``blocked_labels`` (step 1 on (group, word) cells): topics drawn, then each cell's label counts.

``collapsed_labels`` (step 1 for words, topics phi collapsed): token by token (counts built
from z and kept word-major, so that one token's atoms lie side by side),
    p(z_ti = k | z_-ti, x, D_t)  propto  D_t(k) (n_kw^-ti + beta) / (n_k^-ti + V beta)
([Coupled-DP] eq. (10)-(11) with the atom's Dirichlet(beta) base integrated out). Only the atoms
group t reaches (D_t(k) > 0) are scored.

``move_atoms`` (steps 2 and 5): atom by atom, the owner s_k (step 5 only) and the inheritance
r_.k are redrawn from their joint conditional given the labels. The groups' label likelihood

    ln p(z_t | .) = sum_k m_tk ln w_k + sum_s n_ts (ln c_ts - ln W_ts) - n_t ln Z_t

(D_t(k) = c_{t s_k} r_tk w_k / (W_{t s_k} Z_t), ``models.coupled_dp``) depends on atom k only
through the columns of its old and its candidate owner, so with the sufficient statistics
n_ts (labels per source), R_ts (atoms inherited per source), W_ts (mass inherited per source) and
their fall-back versions (a group that inherits nothing takes every atom: Wall_s, Call_s) one
candidate costs O(T) instead of O(T K S). The first term is the same for every candidate and
is dropped. A candidate is impossible (-inf) when a used atom would not be inherited.

``split_merge`` (steps 3 and 6 for words): Metropolis-Hastings moves of a group's tokens between
two atoms, the coefficients (step 3) or the weights given V (step 6) integrated out; nts (T, S)
is left holding the new n_ts. The target and the proposal are derived in ``inference.coupled.gibbs``.

``alpha_given_auxiliaries`` (in step 6): the concentrations alpha_s with the weights integrated
out given the auxiliaries V (``inference.coupled.gibbs``, step 6).
"""

import math

import numpy as np
from numba import njit

TINY = np.finfo(np.float64).tiny  # the floor of gamma draws that underflow (``gibbs._floored``)
ALPHA_ROUNDS = 5  # random-walk proposals per concentration and sweep (``alpha_given_auxiliaries``)

# Compiled once per install into numba's cache. The loops are written on scalars: numba compiles
# array reductions with an axis, ``.max()`` and in-place array arithmetic slowly (up to 1.8 s each,
# paid on the first fit); numpy's error model (inf or nan, not an exception, on division by zero)
# compiles faster and the steps never divide by zero.
compiled = njit(cache=True, error_model="numpy")


@compiled
def row_max(a, i):
    """max_j a[i, j]."""
    top = -np.inf
    for j in range(a.shape[1]):
        top = max(top, a[i, j])
    return top


@compiled
def row_sums(a):
    """sum_j a[i, j], (I,)."""
    sums = np.zeros(a.shape[0])
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            sums[i] += a[i, j]
    return sums


@compiled
def row_cumsum(a):
    """The cumulative sums of each row of a 2-D array."""
    out = np.empty(a.shape)
    for i in range(a.shape[0]):
        total = 0.0
        for j in range(a.shape[1]):
            total += a[i, j]
            out[i, j] = total
    return out


@compiled
def column_sum(a, j):
    """sum_i a[i, j]."""
    total = 0.0
    for i in range(a.shape[0]):
        total += a[i, j]
    return total


@compiled
def log_array(a):
    """ln a, elementwise, of a 2-D array."""
    out = np.empty(a.shape)
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            out[i, j] = np.log(a[i, j])
    return out


@compiled
def _word_counts(x, z, vocab, k_count):
    """(n_kw word-major (V, K) int32, n_k (K,)): the counts of the labels z, one per token (N,) or
    (group, word) cells' counts (C, K) (``gibbs.cells``), in new arrays (``count_words``)."""
    nwk, nk = np.empty((vocab, k_count), dtype=np.int32), np.empty(k_count)
    count_words(x, z, nwk, nk)
    return nwk, nk


@compiled
def count_words(x, z, nwk, nk):  # pragma: no cover (compiled)
    """``_word_counts`` into the arrays given, written over (a sweep's buffers, ``gibbs.Problem.count_buffers``:
    fresh ones every sweep cost more in page faults than the counting, 5 ms a sweep on lee_background's
    4,608 words x 154 atoms). Zeroed element by element: a slice assignment compiles numpy's broadcasting
    checks (seconds on a first fit)."""
    for k in range(nk.shape[0]):
        nk[k] = 0.0
    for w in range(nwk.shape[0]):
        for k in range(nwk.shape[1]):
            nwk[w, k] = 0
    for i in range(x.shape[0]):
        if z.ndim == 1:
            nwk[x[i], z[i]] += 1
            nk[z[i]] += 1
        else:  # a cell's counts (float or integer)
            for k in range(nk.shape[0]):
                nwk[x[i], k] += np.int32(z[i, k])
                nk[k] += z[i, k]


@compiled
def collapsed_log_likelihood(x, z, vocab, k_count, beta):  # pragma: no cover (compiled)
    """sum_kw [ln G(n_kw + beta) - ln G(beta)] - sum_k [ln G(n_k + V beta) - ln G(V beta)] of the
    labels z (N,), token by token: ln G(n + b) - ln G(b) = sum_{i < n} ln(i + b), so each token adds
    ln(n_kw + beta) - ln(n_k + V beta) with the counts of the tokens before it (no sort, no lgamma)."""
    nwk = np.zeros((vocab, k_count), dtype=np.int32)
    nk = np.zeros(k_count, dtype=np.int64)
    vbeta = vocab * beta
    value = 0.0
    for i in range(x.shape[0]):
        w, k = x[i], z[i]
        value += math.log(nwk[w, k] + beta) - math.log(nk[k] + vbeta)
        nwk[w, k] += 1
        nk[k] += 1
    return value


@compiled
def collapsed_labels(x, groups, z, mixing, vocab, beta, uniforms):  # pragma: no cover (compiled)
    """z (N,) is updated in place; ``vocab`` is V, the words' range. ``document_labels`` with every
    token a document of its own (n_dk^-di = 0) and b = 1."""
    document_labels((x, groups, np.arange(x.shape[0] + 1), vocab, beta), z, mixing, 1.0, uniforms)


@compiled
def document_labels(corpus, z, mixing, b, uniforms):  # pragma: no cover (compiled)
    """Step 1 with the document level, theta_d collapsed: z (N,) is updated in place, document by
    document (``corpus`` = (x, groups, starts, vocab, beta): document d's tokens are
    z[starts[d]:starts[d + 1]]), token by token,
        p(z_di = k | .)  propto  (n_dk^-di + b D_t(k)) (n_kw^-di + beta) / (n_k^-di + V beta)
    over the atoms group t reaches; ``uniforms`` (N,) from torch (empty: numba's generator)."""
    _document_labels(corpus, z, mixing, b, uniforms, _word_counts(corpus[0], z, corpus[3], mixing.shape[1]))


@compiled
def _document_labels(corpus, z, mixing, b, uniforms, topic_counts):
    """``document_labels`` given the counts (n_kw (word-major), n_k) of z, which it keeps up to date.
    Every atom the group reaches is scanned: on lee_background (about 55 of them) this was faster
    than SparseLDA's buckets (Yao, Mimno and McCallum 2009) over the 3 atoms a token's word and the 5
    its document use, on average (1.1 against 1.6 ms a sweep: the short loops' branches cost more
    than the long loop's arithmetic)."""
    x, groups, starts, vocab, beta = corpus
    nwk, nk = topic_counts
    t_count, k_count = mixing.shape
    # the atoms each group reaches (D_t(k) > 0), listed, with b D_t(k) beside them; below 1e-30 of
    # the group's largest it is flushed to 0 (as in ``gibbs.update_labels``: subnormal
    # arithmetic is many times slower), the atom kept reachable for the documents that use it
    reach = np.zeros((t_count, k_count), dtype=np.int64)
    prior = np.zeros((t_count, k_count))
    width = np.zeros(t_count, dtype=np.int64)
    for t in range(t_count):
        top = row_max(mixing, t)
        for k in range(k_count):
            if mixing[t, k] > 0:
                reach[t, width[t]] = k
                prior[t, width[t]] = b * mixing[t, k] if mixing[t, k] >= 1e-30 * top else 0.0
                width[t] += 1
    inverse = 1.0 / (nk + vocab * beta)
    ndk = np.zeros(k_count)
    cumulative = np.empty(k_count)
    for d in range(starts.shape[0] - 1):
        lo, hi = starts[d], starts[d + 1]
        for i in range(lo, hi):
            ndk[z[i]] += 1
        for i in range(lo, hi):
            t, w, old = groups[i], x[i], z[i]
            nwk[w, old] -= 1
            nk[old] -= 1
            ndk[old] -= 1
            inverse[old] = 1.0 / (nk[old] + vocab * beta)
            total = 0.0
            for j in range(width[t]):
                k = reach[t, j]
                total += (ndk[k] + prior[t, j]) * (nwk[w, k] + beta) * inverse[k]
                cumulative[j] = total
            target = (uniforms[i] if uniforms.shape[0] else np.random.random()) * total
            j = 0
            while j < width[t] - 1 and cumulative[j] <= target:
                j += 1
            new = reach[t, j]
            z[i] = new
            nwk[w, new] += 1
            nk[new] += 1
            ndk[new] += 1
            inverse[new] = 1.0 / (nk[new] + vocab * beta)
        for i in range(lo, hi):
            ndk[z[i]] = 0


@compiled
def add_token(k, ndk, atoms, where, n_atoms):
    """One token of a document onto atom k, keeping the list of the atoms it uses (atoms[:n_atoms],
    where[k] the place of k); the new length."""
    if ndk[k] == 0:
        where[k] = n_atoms
        atoms[n_atoms] = k
        n_atoms += 1
    ndk[k] += 1
    return n_atoms


@compiled
def remove_token(k, ndk, atoms, where, n_atoms):
    """One token of a document off atom k (``add_token``); the new length."""
    ndk[k] -= 1
    if ndk[k] == 0:
        last = atoms[n_atoms - 1]
        atoms[where[k]] = last
        where[last] = where[k]
        n_atoms -= 1
    return n_atoms


@compiled
def accumulate_topics(x, z, sums, lives):  # pragma: no cover (compiled)
    """One kept sweep's word counts n_kw added to ``sums`` (K, V), in place. Each atom is summed
    over its current life, the sweeps since it last held no token (``lives`` (K,) counts them):
    an index that empties and fills again holds another topic, and starts afresh."""
    k_count = sums.shape[0]
    sizes = np.zeros(k_count, dtype=np.int64)
    for i in range(z.shape[0]):
        sizes[z[i]] += 1
    for k in range(k_count):
        if sizes[k] > 0:
            lives[k] += 1
        elif lives[k] > 0:
            lives[k] = 0
            for w in range(sums.shape[1]):
                sums[k, w] = 0.0
    for i in range(z.shape[0]):
        sums[z[i], x[i]] += 1.0


@compiled
def _cell_log_likelihood(a, words, counts, n_words, nwk, nk, vocab, beta):
    """ln p(the cell's words | atom a's other words), topics integrated out: the words words[:n_words]
    with multiplicities counts[:n_words]; ln G(n + c + beta) - ln G(n + beta) as the sum of
    ln(n + beta + i), i < c (a word rarely repeats within a cell: one logarithm, not two lgammas)."""
    value, total = 0.0, 0
    for i in range(n_words):
        w, c = words[i], counts[i]
        for j in range(c):
            value += math.log(nwk[w, a] + beta + j)
        total += c
    return value + math.lgamma(nk[a] + vocab * beta) - math.lgamma(nk[a] + total + vocab * beta)


@compiled
def opened_tables(document, z, mixing, b, seen, uniforms, opened):  # pragma: no cover (compiled)
    """Antoniak's draw for the ``document`` (lo, hi, t), tokens lo:hi in group t, the one place it is written on
    the CPU: the j-th token (j = 0, 1, ...) of atom k opens a table when u (b D_t(k) + j) < b D_t(k),
    u = uniforms[i] (or numba's draw where ``uniforms`` is empty); ``opened[i]`` says whether it did.
    ``seen`` (K,) is zero before and after."""
    lo, hi, t = document
    for i in range(lo, hi):
        prior = b * mixing[t, z[i]]
        opened[i] = (uniforms[i] if uniforms.shape[0] else np.random.random()) * (prior + seen[z[i]]) < prior
        seen[z[i]] += 1
    for i in range(lo, hi):
        seen[z[i]] = 0


@compiled
def document_tables(groups, starts, z, mixing, b, uniforms):  # pragma: no cover (compiled)
    """m_tk (T, K): the tables of each document's cells by Antoniak's scheme (``opened_tables``),
    summed by group (``inference.coupled.gibbs``, the document level)."""
    tables = np.zeros(mixing.shape)
    seen = np.zeros(mixing.shape[1], dtype=np.int64)
    opened = np.zeros(z.shape[0], dtype=np.bool_)
    for d in range(starts.shape[0] - 1):
        lo, hi = starts[d], starts[d + 1]
        if hi > lo:
            opened_tables((lo, hi, groups[lo]), z, mixing, b, seen, uniforms, opened)
        for i in range(lo, hi):
            if opened[i]:
                tables[groups[i], z[i]] += 1
    return tables


@compiled
def document_log_likelihood(groups, starts, z, mixing, b):  # pragma: no cover (compiled)
    """ln p(z | D) with theta_d integrated out, sum_d [ln G(b) - ln G(b + n_d) + sum_k (ln G(b D_t(k)
    + n_dk) - ln G(b D_t(k)))], the last as sum_{j < n_dk} ln(b D_t(k) + j), token by token."""
    value = 0.0
    seen = np.zeros(mixing.shape[1], dtype=np.int64)
    for d in range(starts.shape[0] - 1):
        lo, hi = starts[d], starts[d + 1]
        value += math.lgamma(b) - math.lgamma(b + hi - lo)
        for i in range(lo, hi):
            k = z[i]
            value += math.log(b * mixing[groups[i], k] + seen[k])
            seen[k] += 1
        for i in range(lo, hi):
            seen[z[i]] = 0
    return value


@compiled
def move_prior_ratio(t, k, j, n, mixing, b, free):
    """The block move's log ratio but for the cell's words (``document_moves``): n tokens of a
    document of group t from atom k to atom j, theta_d integrated out, and the proposals' ratio
    (``free`` the mass of D_t on the atoms the document's other cells leave free, k and j included)."""
    bk, bj = b * mixing[t, k], b * mixing[t, j]
    return (math.lgamma(bj + n) - math.lgamma(bj) - math.lgamma(bk + n) + math.lgamma(bk)
            + math.log(mixing[t, k] * (free - mixing[t, k])) - math.log(mixing[t, j] * (free - mixing[t, j])))


@compiled
def free_atom(t, k, mixing, cumulative_mixing, ndk, room):
    """j ~ D_t over the atoms a document leaves free (ndk[j] = 0), less k, ``room`` their mass; -1
    when there is none. By rejection from D_t (a binary search of ``cumulative_mixing``, its
    cumulative sums) where they hold at least half of its mass, by a scan otherwise: one law."""
    k_count = mixing.shape[1]
    if room >= 0.5:
        while True:
            j = min(np.searchsorted(cumulative_mixing[t], np.random.random() * cumulative_mixing[t, k_count - 1],
                                    side="right"), k_count - 1)
            if ndk[j] == 0 and j != k and mixing[t, j] > 0:
                return j
    target = np.random.random() * room
    j, acc = -1, 0.0
    for kk in range(k_count):
        if ndk[kk] == 0 and kk != k and mixing[t, kk] > 0:
            acc += mixing[t, kk]
            j = kk
            if acc > target:
                break
    return j


@compiled
def document_moves(corpus, z, mixing, b, seed):  # pragma: no cover (compiled)
    """Block moves of the document level: for each document d and each atom k it uses, all n_dk of
    its tokens on k (the cell) move together to an atom j that d does not use, by Metropolis-
    Hastings with theta_d and the topics integrated out (``inference.coupled.gibbs``); z (N,) is
    updated in place. The proposal j ~ D_t over U less k, U the atoms d's other cells leave free
    (the same set from either side, so the reverse move proposes k from U less j):
        ln a = ln G(b D_t(j) + n) - ln G(b D_t(j)) - ln G(b D_t(k) + n) + ln G(b D_t(k))
               + ln p(cell | j) - ln p(cell | k) + ln D_t(k) (S_U - D_t(k)) - ln D_t(j) (S_U - D_t(j)),
    S_U = sum_{a in U} D_t(a). Token moves one at a time must pass through states that split the
    cell, which its document's own counts n_dk make unlikely; these moves do what a table's dish
    move does in the HDP's Chinese restaurant franchise."""
    np.random.seed(seed)
    _document_moves(corpus, z, mixing, b, _word_counts(corpus[0], z, corpus[3], mixing.shape[1]), row_cumsum(mixing))


@compiled
def _document_moves(corpus, z, mixing, b, topic_counts, cumulative_mixing):
    """``document_moves`` given the counts (n_kw, n_k) of z, which it keeps up to date, and D_t's
    cumulative sums, drawing from numba's generator as seeded."""
    x, groups, starts, vocab, beta = corpus
    k_count = mixing.shape[1]
    ndk = np.zeros(k_count, dtype=np.int64)
    cell = (np.zeros(vocab, dtype=np.int64), np.empty(vocab, dtype=np.int64), np.empty(vocab, dtype=np.int64))
    atoms = np.empty(k_count, dtype=np.int64)
    for d in range(starts.shape[0] - 1):
        lo, hi = starts[d], starts[d + 1]
        if hi == lo:
            continue
        t = groups[lo]
        n_atoms = 0
        for i in range(lo, hi):
            if ndk[z[i]] == 0:
                atoms[n_atoms] = z[i]
                n_atoms += 1
            ndk[z[i]] += 1
        for a in range(n_atoms):
            k = atoms[a]
            if ndk[k] == 0:
                continue  # emptied by an earlier move of this document
            # S_U: D_t's mass on the atoms d's other cells leave free (of its total: a share of the
            # approximate step sees part of the empty atoms, ``approximate.sweep_shares``)
            free = cumulative_mixing[t, k_count - 1]
            for other in range(n_atoms):
                kk = atoms[other]
                if ndk[kk] > 0 and kk != k:
                    free -= mixing[t, kk]
            room = free - mixing[t, k]
            if room <= 0:
                continue
            j = free_atom(t, k, mixing, cumulative_mixing, ndk, room)  # j ~ D_t over U less k
            if j >= 0 and _move_cell(corpus, z, (lo, hi, t), (k, j, free), mixing, b, topic_counts, cell):
                ndk[k], ndk[j] = 0, ndk[k]
                atoms[a] = j  # the document's cells as they now lie (the free mass of the next ones)
        for i in range(lo, hi):
            ndk[z[i]] = 0


@compiled
def _move_cell(corpus, z, document, move, mixing, b, topic_counts, cell):
    """One block move (``document_moves``): the ``document`` = (lo, hi, t)'s tokens on atom k to atom
    j, ``move`` = (k, j, S_U), accepted by Metropolis-Hastings; ``cell`` = (word_count, words, counts)
    is scratch space, word_count zero before and after. Returns whether the move was accepted."""
    k, j, free = move
    x, vocab, beta = corpus[0], corpus[3], corpus[4]
    nwk, nk = topic_counts
    word_count, words, counts = cell
    lo, hi, t = document
    # the cell's words, taken out of the topic counts
    n, n_words = 0, np.int64(0)  # (a literal 0 would compile _cell_log_likelihood twice)
    for i in range(lo, hi):
        if z[i] == k:
            w = x[i]
            if word_count[w] == 0:
                words[n_words] = w
                n_words += 1
            word_count[w] += 1
            n += 1
    for i in range(n_words):
        counts[i] = word_count[words[i]]
        word_count[words[i]] = 0
        nwk[words[i], k] -= counts[i]
    nk[k] -= n
    log_ratio = (move_prior_ratio(t, k, j, n, mixing, b, free)
                 + _cell_log_likelihood(j, words, counts, n_words, nwk, nk, vocab, beta)
                 - _cell_log_likelihood(k, words, counts, n_words, nwk, nk, vocab, beta))
    new = j if np.log(np.random.random()) < log_ratio else k
    for i in range(n_words):
        nwk[words[i], new] += counts[i]
    nk[new] += n
    if new == j:
        for i in range(lo, hi):
            if z[i] == k:
                z[i] = j
    return new == j


@compiled
def blocked_labels(x, groups, z, mixing, vocab, beta, seed):  # pragma: no cover (compiled)
    """Step 1 on (group, word) cells: z (C, K), each cell's label counts, is redrawn in place (its
    row sums, the cells' tokens n_c, kept). Topics phi_k ~ Dir(beta + n_k.) (gamma draws,
    normalised; only for atoms some group reaches), then each cell's tokens as one Multinomial(n_c,
    p(k) propto D_t(k) phi_k(w)), drawn as binomials over the atoms its group reaches, in order of
    falling D_t(k); ``seed``
    seeds numba's generator (drawn by the caller from torch's)."""
    np.random.seed(seed)
    draw_cell_labels(x, groups, z, mixing, vocab, beta)


@compiled
def draw_cell_labels(x, groups, z, mixing, vocab, beta):  # pragma: no cover (compiled)
    """``blocked_labels`` on numba's generator as it stands (for callers that seed it once)."""
    k_count = mixing.shape[1]
    nwk, nk = _word_counts(x, z, vocab, k_count)
    phi = np.zeros((vocab, k_count))  # word-major, as nwk
    for k in range(k_count):
        reached = False
        for t in range(mixing.shape[0]):
            reached = reached or mixing[t, k] > 0
        if not reached:
            continue
        total = 0.0
        for w in range(vocab):
            phi[w, k] = max(np.random.gamma(beta + nwk[w, k]), 1e-300)
            total += phi[w, k]
        for w in range(vocab):
            phi[w, k] /= total
    # each group's atoms by falling D_t(k): a cell's tokens are then mostly placed after a few binomials
    order = np.empty(mixing.shape, dtype=np.int64)
    width = np.zeros(mixing.shape[0], dtype=np.int64)
    for t in range(mixing.shape[0]):
        order[t] = np.argsort(-mixing[t])
        for k in range(k_count):
            width[t] += mixing[t, k] > 0
    p = np.empty(k_count)
    for c in range(x.shape[0]):
        t, w = groups[c], x[c]
        left, last = 0.0, 0
        for k in order[t, :width[t]]:
            p[k] = mixing[t, k] * phi[w, k]
            left += p[k]
            last = k if p[k] > 0 else last
        remaining = 0
        for k in range(k_count):
            remaining += int(z[c, k])
        z[c] = 0.0
        for k in order[t, :width[t]]:
            if remaining == 0:
                break
            if p[k] > 0:
                m = remaining if p[k] >= left else np.random.binomial(remaining, p[k] / left)
                z[c, k] = m
                remaining -= m
                left -= p[k]
        z[c, last] += remaining  # what a running sum rounded above the last p[k] left (exactly: none)


@compiled
def _term(n, c, log_c, log_mass, collapsed):
    """(n (ln c - ln W), 0), or with the coefficients integrated out (c = alpha_s q_ts)
    (ln G(c + n) - ln G(c) - n ln W, 0); (0, 1) when n > 0 meets c = 0 or W = 0: a label of zero
    probability, counted apart so that running sums never hold an infinity."""
    if n == 0:
        return 0.0, 0
    if log_c == -np.inf or log_mass == -np.inf:
        return 0.0, 1
    if collapsed:
        return math.lgamma(c + n) - math.lgamma(c) - n * log_mass, 0
    return n * (log_c - log_mass), 0


@compiled
def _normaliser(total, norm, collapsed):
    """The groups' term in Z_t = sum of c_ts over the active sources: n_t ln Z_t, or with the
    coefficients integrated out (Z_t = sum of alpha_s q_ts) ln G(Z_t + n_t) - ln G(Z_t)."""
    if collapsed:
        return math.lgamma(norm + total) - math.lgamma(norm)
    return total * np.log(norm)


@compiled
def _log(value):
    return np.log(value) if value > 0 else -np.inf


@compiled
def _logaddexp(a, b):
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    top = max(a, b)
    return top + np.log(np.exp(a - top) + np.exp(b - top))


@compiled
def _column(s, sign, columns, coefficients, sums):
    """Add (sign 1) or remove (sign -1) column s's share of every group's ``sums`` (base, base_all,
    norm, norm_all, broken, broken_all, and n_t, which stays; ``move_atoms``). The normalisers Z_t are summed afresh on
    adding (coefficients span hundreds of orders of magnitude, and Z - c_ts would leave rounding
    residue of c_ts's size where the rest of Z is far smaller)."""
    n, inherited, mass, log_mass, mass_all, log_mass_all, atoms_all, per_group, bad = columns
    coeffs, log_c, collapsed = coefficients
    base, base_all, norm, norm_all, broken, broken_all, _ = sums
    for t in range(n.shape[0]):
        value, flag = _term(n[t, s], coeffs[t, s], log_c[t, s], log_mass[t, s], collapsed)
        base[t] += sign * value
        broken[t] += sign * flag
        value, flag = _term(n[t, s], coeffs[t, s], log_c[t, s], log_mass_all[s], collapsed)
        base_all[t] += sign * value
        broken_all[t] += sign * flag
        if sign > 0:
            norm[t], norm_all[t] = 0.0, 0.0
            for j in range(coeffs.shape[1]):
                norm[t] += coeffs[t, j] if inherited[t, j] > 0 else 0.0
                norm_all[t] += coeffs[t, j] if atoms_all[j] > 0 else 0.0


@compiled
def _shift_atom(k, s, sign, labels, columns):
    """Add (sign 1) or remove (sign -1) atom k, owned by s, from every statistic of ``columns``
    (``move_atoms``). Removing sums the column's masses afresh: weights span hundreds of orders of
    magnitude, and W - w_k would leave rounding residue of w_k's size where the rest of W is far
    smaller."""
    counts, inherit, source, weight = labels
    n, inherited, mass, log_mass, mass_all, log_mass_all, atoms_all, per_group, bad = columns
    w = weight[k]
    atoms_all[s] += sign
    if sign > 0:
        mass_all[s] += w
        for t in range(counts.shape[0]):
            mass[t, s] += inherit[t, k] * w
    else:
        mass_all[s] = 0.0
        for t in range(counts.shape[0]):
            mass[t, s] = 0.0
        for j in range(weight.shape[0]):
            if source[j] == s and j != k:
                mass_all[s] += weight[j]
                for t in range(counts.shape[0]):
                    mass[t, s] += inherit[t, j] * weight[j]
    log_mass_all[s] = _log(mass_all[s]) if atoms_all[s] > 0 else -np.inf
    for t in range(counts.shape[0]):
        m, r = counts[t, k], inherit[t, k]
        n[t, s] += sign * m
        inherited[t, s] += sign * r
        if inherited[t, s] == 0:
            mass[t, s] = 0.0
        log_mass[t, s] = _log(mass[t, s])
        per_group[t] += sign * r
        if m > 0 and r == 0:
            bad[t] += sign


@compiled
def _statistics(labels, coefficients):
    """(columns, sums) of ``move_atoms`` with every atom in: n_ts, R_ts, W_ts and its logarithm, the
    fall-back Wall_s, Call_s, the atoms each group inherits and the used ones it does not; and the
    groups' sums (``_column``)."""
    counts = labels[0]
    t_count, k_count = counts.shape
    s_count = coefficients[0].shape[1]
    log_mass = np.full((t_count, s_count), -np.inf)
    columns = (np.zeros((t_count, s_count)), np.zeros((t_count, s_count), dtype=np.int64), np.zeros((t_count, s_count)),
               log_mass, np.zeros(s_count), np.full(s_count, -np.inf), np.zeros(s_count, dtype=np.int64),
               np.zeros(t_count, dtype=np.int64), np.zeros(t_count, dtype=np.int64))
    add = np.int64(1)  # (a literal sign would compile each helper twice)
    for k in range(k_count):
        _shift_atom(k, labels[2][k], add, labels, columns)
    sums = (np.zeros(t_count), np.zeros(t_count), np.zeros(t_count), np.zeros(t_count),
            np.zeros(t_count, dtype=np.int64), np.zeros(t_count, dtype=np.int64), row_sums(counts))
    for s in range(s_count):
        _column(s, add, columns, coefficients, sums)
    return columns, sums


@compiled
def _owner_scores(k, labels, columns, coefficients, sums, priors, move_owner, scratch):
    """Each source's score as atom k's owner (only its own without ``move_owner``), with the
    inheritance summed out, into ``scratch`` = (ll (S, 2, T), score (S,)): the groups' log
    likelihoods behind each score (``priors`` = (ln q, ln (1 - q), ln Gamma(w_k; alpha_j / L, 1));
    atom k taken out of the statistics); returns the largest score."""
    counts, inherit, source, weight = labels
    n, inherited, mass, log_mass, mass_all, log_mass_all, atoms_all, per_group, bad = columns
    coeffs, log_c, collapsed = coefficients
    base, base_all, norm, norm_all, broken, broken_all, total = sums
    log_q, log_not_q, weight_prior = priors
    ll, score = scratch
    t_count, s_count = coeffs.shape
    old, w = source[k], weight[k]
    top = -np.inf
    for j in range(s_count):
        score[j] = -np.inf
        if not move_owner and j != old:
            continue
        score[j] = weight_prior[k, j]
        log_all_with = np.log(mass_all[j] + w)
        for t in range(t_count):
            m, c, lc = counts[t, k], coeffs[t, j], log_c[t, j]
            both = -np.inf
            for r in range(2):
                z_t = 1.0
                if per_group[t] + r == 0:  # the fall-back: every atom, W = Wall
                    z_t = norm_all[t] - (c if atoms_all[j] > 0 else 0.0) + c
                    before, lost = _term(n[t, j], c, lc, log_mass_all[j], collapsed)
                    after, gained = _term(n[t, j] + m, c, lc, log_all_with, collapsed)
                    value, flags = base_all[t] - before + after, broken_all[t] - lost + gained
                elif bad[t] > 0 or (m > 0 and r == 0):
                    value, flags = 0.0, 1
                else:
                    z_t = norm[t] - (c if inherited[t, j] > 0 else 0.0) + (c if inherited[t, j] + r > 0 else 0.0)
                    log_new = log_mass[t, j] if r == 0 else np.log(mass[t, j] + w)
                    before, lost = _term(n[t, j], c, lc, log_mass[t, j], collapsed)
                    after, gained = _term(n[t, j] + m, c, lc, log_new, collapsed)
                    value, flags = base[t] - before + after, broken[t] - lost + gained
                if flags > 0 or (total[t] > 0 and z_t <= 0):
                    value = -np.inf
                elif total[t] > 0:
                    value -= _normaliser(total[t], z_t, collapsed)
                ll[j, r, t] = value
                both = _logaddexp(both, value + (log_q[t, j] if r == 1 else log_not_q[t, j]))
            score[j] += both
        top = max(top, score[j])
    return top


@compiled
def _draw_owner(old, score, top, uniform):
    """A source drawn in proportion to exp(score) by ``uniform``; ``old`` where none is possible."""
    new = old
    if top == -np.inf:
        return new
    cumulative = 0.0
    for j in range(score.shape[0]):
        cumulative += np.exp(score[j] - top)
    target = uniform * cumulative
    cumulative = 0.0
    for j in range(score.shape[0]):
        if score[j] > -np.inf:
            new = j  # (the last possible owner, should rounding leave the target above the sum)
            cumulative += np.exp(score[j] - top)
            if cumulative > target:
                break
    return new


@compiled
def _draw_inheritance(k, new, inherit, ll, priors, uniforms):
    """r_.k given its owner ``new``: each group inherits atom k with its conditional probability."""
    log_q, log_not_q = priors[0], priors[1]
    for t in range(inherit.shape[0]):
        on = ll[new, 1, t] + log_q[t, new]
        off = ll[new, 0, t] + log_not_q[t, new]
        if on == -np.inf:
            keep = 0.0
        elif off == -np.inf:
            keep = 1.0
        else:
            keep = 1.0 / (1.0 + np.exp(off - on))
        inherit[t, k] = 1 if uniforms[k, t] < keep else 0


@compiled
def move_atoms(labels, coeffs, priors, uniforms, move_owner, collapsed):  # pragma: no cover (compiled)
    """``labels`` = (counts m (T, K), inherit r (T, K) in {0, 1}, source s (K,), weights w (K,)): r
    and s are updated in place; ``priors`` = (ln q, ln (1 - q), weight_prior (K, S) = ln Gamma(w_k;
    alpha_j / L, 1)); uniforms (K, T + 1); ``move_owner``: step 5, else step 2.

    The groups' sums base_t = sum_s n_ts (ln c_ts - ln W_ts), its fall-back base_all_t, and the
    normalisers Z_t (norm, norm_all) are kept current: taking atom k out touches only its
    owner's column. ``collapsed``: coeffs holds alpha_s q_ts and the coefficients are integrated
    out, c_t restricted to the active sources A_t and renormalised being Dir(alpha q_A) (step 3):
    p(z_t | .) = G(sum_A alpha q) / G(sum_A alpha q + n_t) prod_A G(alpha_s q_ts + n_ts) / G(alpha_s q_ts)
    x prod_k (w_k / W_{t s_k})^{m_tk}; a step 3 draw of c must follow."""
    counts, inherit, source, weight = labels
    t_count, k_count = counts.shape
    coefficients = (coeffs, log_array(coeffs), collapsed)
    columns, sums = _statistics(labels, coefficients)
    ll, score = np.empty((coeffs.shape[1], 2, t_count)), np.empty(coeffs.shape[1])  # each atom's, reused
    add, remove = np.int64(1), np.int64(-1)  # (literal signs would compile each helper twice)
    for k in range(k_count):
        old = source[k]
        # take atom k out: only its owner's column changes
        _column(old, remove, columns, coefficients, sums)
        _shift_atom(k, old, remove, labels, columns)
        _column(old, add, columns, coefficients, sums)
        top = _owner_scores(k, labels, columns, coefficients, sums, priors, move_owner, (ll, score))
        new = _draw_owner(old, score, top, uniforms[k, t_count]) if move_owner else old
        source[k] = new
        if top > -np.inf or not move_owner:  # (no possible owner: the atom stays as it was)
            _draw_inheritance(k, new, inherit, ll, priors, uniforms)
        # put atom k back under its (new) owner
        _column(new, remove, columns, coefficients, sums)
        _shift_atom(k, new, add, labels, columns)
        _column(new, add, columns, coefficients, sums)


@compiled
def _source_term(n, param, weights_integrated):
    """The n_ts-dependent term of one source. Coefficients integrated out: ln G(alpha_s q_ts + n)
    (param = alpha_s q_ts). Weights integrated out given V: (n - 1) ln V - ln G(n), V's
    Gamma(n, W) density without the W^n that cancels the labels' W^-n (param = ln V_ts); V = 0
    exactly when n = 0, so n crossing 0 is impossible."""
    if not weights_integrated:
        return math.lgamma(param + n)
    if n == 0 or param == -np.inf:
        return 0.0 if n == 0 and param == -np.inf else -np.inf
    return (n - 1) * param - math.lgamma(n)


@compiled
def _log_target(t, pair, allocation, stats, target):
    """ln f of one allocation of the moved tokens (``allocation`` = (words, word_count, on_first):
    on_first[w] of word w's word_count[w] on pair[0], the rest on pair[1]) up to terms that no
    allocation changes; the statistics ``stats`` = (nwk, nk, nts, source) exclude the moved tokens,
    ``target`` = (log_token, shape, source_param, weights_integrated, vbeta, beta) (``split_merge``)."""
    words, word_count, on_first = allocation
    nwk, nk, nts, source = stats
    log_token, shape, source_param, weights_integrated, vbeta, beta = target
    value = 0.0
    for side in range(2):
        k = pair[side]
        total = 0
        for j in range(words.shape[0]):
            w = words[j]
            m = on_first[w] if side == 0 else word_count[w] - on_first[w]
            value += math.lgamma(nwk[w, k] + m + beta)
            total += m
        s = source[k]
        value += total * log_token[t, k] - math.lgamma(nk[k] + total + vbeta)
        if weights_integrated:
            value += math.lgamma(shape[k] + nk[k] + total)
        if source[pair[0]] != source[pair[1]]:
            value += _source_term(nts[t, s] + total, source_param[t, s], weights_integrated)
    return value


@compiled
def _sequential(t, pair, allocation, draw, stats, target):
    """Sequential allocation, word by word in the given order: word w's tokens go to pair[0] each
    with the probability p_w that one token would, given the words placed before it, so
    on_first[w] ~ Binomial(c_w, p_w). ``draw``: sample on_first, else score the one given. Returns
    ln of the probability of the token-level allocation, sum_w m ln p_w + (c_w - m) ln(1 - p_w)
    (each of the C(c_w, m) subsets equally likely); the statistics are left as they were."""
    words, word_count, on_first = allocation
    nwk, nk, nts, source = stats
    log_token, shape, source_param, weights_integrated, vbeta, beta = target
    log_q = 0.0
    split_sources = source[pair[0]] != source[pair[1]]
    score = np.empty(2)
    for j in range(words.shape[0]):
        w = words[j]
        for side in range(2):
            k = pair[side]
            s = source[k]
            score[side] = log_token[t, k] + np.log(nwk[w, k] + beta) - np.log(nk[k] + vbeta)
            if weights_integrated:  # G(a + n + 1) / G(a + n), and V^n / G(n + 1) against V^(n - 1) / G(n)
                score[side] += np.log(shape[k] + nk[k])
                if split_sources:
                    score[side] += source_param[t, s] - np.log(max(nts[t, s], 1.0))
            elif split_sources:  # G(a + n + 1) / G(a + n)
                score[side] += np.log(source_param[t, s] + nts[t, s])
        p = 1.0 / (1.0 + np.exp(min(score[1] - score[0], 700.0))) if score[0] > -np.inf else 0.0
        p = min(max(p, 1e-12), 1 - 1e-12)
        c = word_count[w]
        if draw:
            on_first[w] = np.random.binomial(c, p)
        m = on_first[w]
        log_q += m * np.log(p) + (c - m) * np.log1p(-p)
        _place(t, w, pair, m, c - m, stats)
    for j in range(words.shape[0]):
        w = words[j]
        _place(t, w, pair, -on_first[w], on_first[w] - word_count[w], stats)
    return log_q


@compiled
def _place(t, w, pair, first, second, stats):
    """Add first tokens of word w (group t) to pair[0] and second to pair[1] (negative: remove), in
    ``stats`` = (nwk, nk, nts, source)."""
    nwk, nk, nts, source = stats
    for k, m in ((pair[0], first), (pair[1], second)):
        nwk[w, k] += m
        nk[k] += m
        nts[t, source[k]] += m


@compiled
def _log_proposal(log_sequential, allocation):
    """ln of the mixture proposal: 1/2 sequential allocation, 1/4 all on pair[0], 1/4 all on pair[1]."""
    words, word_count, on_first = allocation
    all_first, all_second = True, True
    for j in range(words.shape[0]):
        w = words[j]
        all_first = all_first and on_first[w] == word_count[w]
        all_second = all_second and on_first[w] == 0
    value = np.log(0.5) + log_sequential
    if all_first or all_second:
        value = np.logaddexp(value, np.log(0.25))
    return value


@compiled
def _choose_pair(atoms, used, pair):
    """The pair of a move, in ``pair``: a used atom of ``atoms`` (those the group reaches), then any
    other of them, both uniformly; returns how many of them are used."""
    n_used, first = 0, 0
    for k in atoms:
        n_used += used[k] > 0
    pick = np.random.randint(n_used)
    for j in range(atoms.shape[0]):
        if used[atoms[j]] > 0:
            if pick == 0:
                first = j
                break
            pick -= 1
    second = np.random.randint(atoms.shape[0] - 1)
    pair[0], pair[1] = atoms[first], atoms[second + (second >= first)]
    return n_used


@compiled
def _gather(x, z, tokens, pair, members, touched, word_count, on_first):
    """Group t's ``tokens`` on either atom of ``pair`` into ``members``, their words counted in
    ``word_count`` (those on pair[0] in ``on_first``); returns (their number, the words, most
    tokens first)."""
    c, n_words = 0, 0
    for token in tokens:
        k = z[token]
        if k == pair[0] or k == pair[1]:
            members[c] = token
            c += 1
            w = x[token]
            if word_count[w] == 0:
                touched[n_words] = w
                n_words += 1
            word_count[w] += 1
            on_first[w] += k == pair[0]
    return c, touched[:n_words][np.argsort(-word_count[touched[:n_words]], kind="mergesort")]


@compiled
def _relabel(x, z, members, pair, proposed):
    """After an accepted move: word w's tokens among ``members``, a uniform subset of proposed[w] of
    them on pair[0], the rest on pair[1] (``proposed`` is emptied)."""
    np.random.shuffle(members)
    for token in members:
        w = x[token]
        if proposed[w] > 0:
            z[token] = pair[0]
            proposed[w] -= 1
        else:
            z[token] = pair[1]


@compiled
def split_merge(words, z, target, nts, reachable, moves, seed):  # pragma: no cover (compiled)
    """z (N,) is updated in place. ``words`` = (x, by_group, group_starts, vocab): group t's tokens are
    by_group[group_starts[t]:group_starts[t + 1]]; ``target`` = (log_token, shape, source_param,
    weights_integrated, source, beta): log_token (T, K), ln of what each token of group t on atom k
    contributes, ln(w_k / W_{t s_k}) with the coefficients integrated out, ln c_{t s_k} - ln(1 + R_k)
    with the weights integrated out given V (``weights_integrated``; shape (K,) alpha_{s_k} / L);
    source_param (T, S): alpha_s q_ts, or ln V_ts (``_source_term``); nts (T, S): n_ts; ``reachable``
    = (reach (T, K), width (T,)): the atoms each group can use (D_t(k) > 0), listed; ``moves`` per
    group; ``seed`` seeds numba's generator (drawn by the caller from torch's)."""
    np.random.seed(seed)
    x, by_group, group_starts, vocab = words
    log_token, shape, source_param, weights_integrated, source, beta = target
    reach, width = reachable
    k_count = log_token.shape[1]
    nwk, nk = _word_counts(x, z, vocab, k_count)
    stats, scores = (nwk, nk, nts, source), (log_token, shape, source_param, weights_integrated, vocab * beta, beta)
    word_count = np.zeros(vocab, dtype=np.int64)
    on_first, proposed = np.zeros(vocab, dtype=np.int64), np.zeros(vocab, dtype=np.int64)
    touched = np.empty(vocab, dtype=np.int64)
    members = np.empty(x.shape[0], dtype=np.int64)
    used = np.zeros(k_count, dtype=np.int64)  # m_tk of the group at hand
    pair = np.empty(2, dtype=np.int64)
    for t in range(group_starts.shape[0] - 1):
        tokens = by_group[group_starts[t]:group_starts[t + 1]]
        atoms = reach[t, :width[t]]
        if width[t] < 2 or tokens.shape[0] == 0:
            continue
        used[:] = 0
        for token in tokens:
            used[z[token]] += 1
        for _ in range(moves):
            n_used = _choose_pair(atoms, used, pair)
            # the moved tokens: group t's on either atom, taken out of the statistics
            c, moved = _gather(x, z, tokens, pair, members, touched, word_count, on_first)
            for w in moved:
                _place(t, w, pair, -on_first[w], on_first[w] - word_count[w], stats)
            # propose from the mixture, independently of the current allocation
            u = np.random.random()
            for w in moved:
                proposed[w] = word_count[w] if u < 0.25 else 0
            new, old = (moved, word_count, proposed), (moved, word_count, on_first)
            log_seq_new = _sequential(t, pair, new, u >= 0.5, stats, scores)
            log_seq_old = _sequential(t, pair, old, False, stats, scores)
            new_first, old_first = proposed[moved].sum(), used[pair[0]]
            # the pair's selection probability, (1[a used] + 1[b used]) / (atoms used x (width - 1))
            used_after = n_used - (old_first > 0) - (c - old_first > 0) + (new_first > 0) + (c - new_first > 0)
            log_ratio = (_log_target(t, pair, new, stats, scores) - _log_target(t, pair, old, stats, scores)
                         + _log_proposal(log_seq_old, old) - _log_proposal(log_seq_new, new)
                         + np.log(((new_first > 0) + (c - new_first > 0)) / used_after)
                         - np.log(((old_first > 0) + (c - old_first > 0)) / n_used))
            accept = np.log(np.random.random()) < log_ratio
            final = proposed if accept else on_first
            for w in moved:
                _place(t, w, pair, final[w], word_count[w] - final[w], stats)
            if accept:  # word w's tokens: a uniform subset of final[w] of them on pair[0]
                _relabel(x, z, members[:c], pair, proposed)
                used[pair[0]], used[pair[1]] = new_first, c - new_first
            for w in moved:
                word_count[w], on_first[w], proposed[w] = 0, 0, 0


@compiled
def _alpha_terms(value, j, auxiliaries, layout, prior):
    """The terms of ln p(alpha | V, m, s, c) in alpha_j = value alone, plus ln value (the log-normal
    walk's Jacobian): its Gamma prior, each atom of source j's weight integrated out given V,
    ln G(a + m_k) - ln G(a) - a ln(1 + R_k) with a = value / L, and ln Dir(c_t; alpha q_t)'s terms in
    c_tj. The rest, sum_t ln G(sum_s alpha_s q_ts), couples the sources (``alpha_given_auxiliaries``
    names the tuples)."""
    used, log_rate = auxiliaries
    source, coeffs, q, atoms_per_source = layout
    prior_shape, prior_rate = prior
    shape = value / atoms_per_source
    total = (prior_shape - 1) * np.log(value) - prior_rate * value + np.log(value)
    log_gamma_shape = math.lgamma(shape)
    for k in range(used.shape[0]):
        if source[k] == j:
            total += math.lgamma(shape + used[k]) - log_gamma_shape - shape * log_rate[k]
    for t in range(q.shape[0]):
        if q[t, j] > 0:
            conc = value * q[t, j]
            total += (conc - 1) * np.log(max(coeffs[t, j], TINY)) - math.lgamma(conc)
    return total


@compiled
def alpha_given_auxiliaries(alpha, auxiliaries, layout, prior, walk):  # pragma: no cover (compiled)
    """alpha (S,) in place by rounds of a log-normal random walk (``walk`` = (steps, log_uniforms)),
    one source at a time: alpha_j' = alpha_j exp(steps[r, j]), accepted when log_uniforms[r, j] is
    below the ratio of the own terms (``_alpha_terms``; ``auxiliaries`` = (m_k the counts per atom,
    log_rate ln(1 + R_k)); ``layout`` = (source, coeffs, q, atoms_per_source); ``prior`` = alpha's
    Gamma(shape, rate)) and of sum_t ln G(sum_s alpha_s q_ts)."""
    steps, log_uniforms = walk
    q = layout[2]
    totals = np.zeros(q.shape[0])  # sum_s alpha_s q_ts
    moved = np.empty(q.shape[0])
    for j in range(alpha.shape[0]):
        for t in range(q.shape[0]):
            totals[t] += alpha[j] * q[t, j]
    for r in range(steps.shape[0]):
        for j in range(alpha.shape[0]):
            proposal = alpha[j] * np.exp(steps[r, j])
            log_ratio = (_alpha_terms(proposal, j, auxiliaries, layout, prior)
                         - _alpha_terms(alpha[j], j, auxiliaries, layout, prior))
            for t in range(q.shape[0]):
                moved[t] = totals[t] + (proposal - alpha[j]) * q[t, j]
                if q[t, j] > 0:
                    log_ratio += math.lgamma(moved[t]) - math.lgamma(totals[t])
            if log_uniforms[r, j] < log_ratio:
                alpha[j] = proposal
                for t in range(q.shape[0]):
                    totals[t] = moved[t]
