"""Held-out perplexity by document completion: one function that scores every topic model alike.

For each test document (tokens outside ``vocab`` dropped first, order kept), the tokens at even
positions 0, 2, 4, ... estimate the document's topic proportions theta_d with the topics held
fixed, and the tokens at odd positions are scored:

    perplexity = exp( - sum_{d, odd i} ln sum_k theta_dk phi_{k, w_di}  /  #odd tokens )

theta_d is the posterior mode under a symmetric Dirichlet(1 + ``smoothing``) prior, found by EM
("fold-in"): responsibilities r_dik propto theta_dk phi_{k, w_di}, then
theta_dk propto smoothing + sum_i r_dik. A document without even tokens keeps the uniform theta.
The work is over distinct (document, word) pairs with their counts, never a D x V x K tensor.
"""

import numpy as np


def _topic_word(topic_word) -> np.ndarray:
    phi = np.asarray(topic_word, dtype=np.float64)
    if phi.ndim != 2 or 0 in phi.shape:
        raise ValueError(f"topic_word must be a non-empty K x V array, got shape {phi.shape}")
    if not np.isfinite(phi).all() or (phi < 0).any():
        raise ValueError("topic_word must hold finite, non-negative probabilities")
    sums = phi.sum(1)
    if not np.allclose(sums, 1.0, atol=1e-6):
        worst = int(np.abs(sums - 1).argmax())
        raise ValueError(f"every row of topic_word must sum to 1; row {worst} sums to {sums[worst]:.6g}")
    return phi


def _split_tokens(vocab, docs, n_words):
    """(doc, word) index arrays of the even and of the odd positions, out-of-vocabulary dropped."""
    vocab = list(vocab)
    if len(vocab) != n_words:
        raise ValueError(f"vocab has {len(vocab)} tokens but topic_word has {n_words} columns")
    index = {token: i for i, token in enumerate(vocab)}
    if len(index) != len(vocab):
        raise ValueError("vocab holds duplicate tokens")
    halves = ([], [], [], [])  # even docs, even words, odd docs, odd words
    for d, doc in enumerate(docs):
        if isinstance(doc, str):
            raise ValueError(f"docs[{d}] is a string; every document must be a list of tokens")
        ids = [index[token] for token in doc if token in index]
        for half, part in ((0, ids[0::2]), (2, ids[1::2])):
            halves[half].extend([d] * len(part))
            halves[half + 1].extend(part)
    return [np.asarray(h, dtype=np.int64) for h in halves]


def _pairs(doc_ids, word_ids, n_words):
    """Distinct (doc, word) pairs and their counts."""
    key, counts = np.unique(doc_ids * n_words + word_ids, return_counts=True)
    return key // n_words, key % n_words, counts.astype(np.float64)


def fold_in(phi: np.ndarray, doc_ids, word_ids, n_docs: int, *, smoothing=0.1, iterations=100,
            start=None) -> np.ndarray:
    """theta (n_docs x K) by EM on the given tokens, the topics ``phi`` (K x V) held fixed:
    theta_dk propto ``smoothing`` (a number, or per topic (K,) or per document and topic) + the
    responsibilities of d's tokens; from ``start`` (uniform by default; a document without tokens
    ends at the normalised smoothing)."""
    from scipy import sparse  # slow to import; the CLI's start does without

    k = phi.shape[0]
    theta = np.full((n_docs, k), 1.0 / k) if start is None else np.broadcast_to(start / start.sum(-1, keepdims=True),
                                                                                (n_docs, k)).copy()
    d, w, c = _pairs(doc_ids, word_ids, phi.shape[1])
    phi_t = phi.T[w]  # (pairs, K)
    # pairs -> documents as a sparse sum, built once (np.add.at in the loop is an unbuffered scatter)
    to_docs = sparse.csr_matrix((np.ones(d.size), (d, np.arange(d.size))), shape=(n_docs, d.size))
    for _ in range(iterations):
        joint = theta[d] * phi_t
        resp = joint * (c / np.maximum(joint.sum(1), np.finfo(float).tiny))[:, None]
        theta = smoothing + to_docs @ resp
        theta /= theta.sum(1, keepdims=True)
    return theta


def completion_perplexity(topic_word, vocab, docs, *, smoothing=0.1, iterations=100) -> float:
    """Held-out perplexity of ``docs`` (lists of tokens) under topics ``topic_word`` (K x V
    probabilities over ``vocab``); see the module docstring. Lower is better; a model that gives
    a scored token zero probability gets ``inf``.

    Parameters
    ----------
    topic_word : (K, V) topic-word probabilities. vocab : the V words, in their order.
    docs : the held-out documents, each a list of tokens.
    smoothing, iterations : the fold-in of each document's proportions on its even-position tokens.

    Returns
    -------
    float: exp(-mean log probability of the odd-position tokens).
    """
    phi = _topic_word(topic_word)
    docs = list(docs)
    even_d, even_w, odd_d, odd_w = _split_tokens(vocab, docs, phi.shape[1])
    if odd_w.size == 0:
        raise ValueError("no held-out tokens to score: every document has fewer than two in-vocabulary tokens")
    theta = fold_in(phi, even_d, even_w, len(docs), smoothing=smoothing, iterations=iterations)
    d, w, c = _pairs(odd_d, odd_w, phi.shape[1])
    with np.errstate(divide="ignore"):
        log_p = np.log((theta[d] * phi.T[w]).sum(1))
    return float(np.exp(-(c * log_p).sum() / c.sum()))
