"""Step 1 of the words with the topics and every document's proportions drawn, in torch: given
them the labels are independent, so a sweep is a few large tensor operations over chunks of
tokens, on whatever device holds the data (CUDA, or the CPU's threads). No approximation but
float32's (below): a blocked Gibbs step with data augmentation, like ``inference.coupled.parallel``'s, with theta_d
drawn where that step integrates it out (so there is no sequential loop over a document's tokens).

The document level. Steps 2-7 read (z, m) under p(z, m | D, x), theta_d and phi integrated out,
and the tables m are Antoniak's auxiliaries given z, p(theta, z, m | D) = p(theta | D) p(z | theta)
p(m | z, D) (``gibbs``): m is independent of theta given z. One sweep of step 1:

  1a  m dropped (it is redrawn in 1d); phi_k ~ Dir(beta + n_k.) given z (``parallel.draw_topics``);
  1b  theta_d ~ Dir(b D_t + n_d.) given z, for each document d of group t ([Coupled-DP]'s
      document level is theta_d ~ DP(b, D_t); over the truncated pool, Dir(b D_t));
  1c  every token at once:  p(z_di = k | theta, phi)  propto  theta_dk phi_k(w_di);
  1d  m given z by Antoniak's scheme (``gibbs.draw_tables``): the j-th token (j = 0, 1, ...) of
      atom k in document d opens a table with probability b D_t(k) / (b D_t(k) + j). Any order of
      the cell's tokens gives the same law of m_dk, so a token's j is its rank among the cell's
      tokens after a stable sort by (document, atom);
  then theta and phi are dropped. Each of 1a-1d draws from its full conditional, so the step keeps
  p(z, m | D, x) (``tests/test_coupled_gibbs.py``: the one-step and Geweke tests).

Without the document level every token is a document of its own with b = 1 and no tables:
integrating its theta out, p(z_i = k | phi, D) propto D_t(k) phi_k(w_i) ([Coupled-DP] eq. (10)-(11)
given phi), and 1c reads D_t in place of theta_d.

What it costs and how it mixes. A sweep is O(N K) arithmetic (every token scores every atom), done
in chunks of ``CHUNK_TOKENS`` tokens by whole documents, with no sequential dependence; the
collapsed step is O(N x atoms a document uses) but sequential. With phi drawn, a word's tokens
rarely move to an atom that holds none of them (beta = 0.01 gives such words phi ~ 1e-30 in a
typical draw), and with theta_d drawn a token rarely joins an atom its document does not use:
it needs more sweeps than the collapsed step for the same held-out perplexity
(``benchmarks/reports/gpu.md``). The device's arithmetic: the draws of phi and theta are float64
(small Gamma shapes underflow float32), the (tokens, K) scores float32, half the memory and time:
a float32 running total absorbs a score below about 6e-8 of the total before it, so such atoms
(together at most K x 6e-8 of a token's probability) are not drawn. Scored in float64, a million
generated tokens gave the same held-out perplexity (1,163.6 against 1,163.1 after one sweep).
Terenin et al.'s Polya-urn topics (sparse, approximate) are not used: phi is the exact draw.
"""

import numpy as np
import torch

from bnpzoo.inference.coupled.parallel import draw_topics

# tokens per chunk, by device: a chunk's (tokens, K) float32 scores take 4 K bytes a token, twice
CHUNK_TOKENS = {"cuda": 1 << 21, "cpu": 1 << 15}


def chunks(starts, device: torch.device) -> list:
    """(first document, end document, first token, end token) of consecutive chunks of whole
    documents, each about ``CHUNK_TOKENS`` tokens (a longer document is a chunk of its own);
    ``starts`` (numpy) where each document starts, and N last."""
    chunk_tokens = CHUNK_TOKENS.get(device.type, CHUNK_TOKENS["cpu"])
    bounds, first, count = [], 0, len(starts) - 1
    while first < count:
        end = min(max(int(np.searchsorted(starts, starts[first] + chunk_tokens, side="right")) - 1, first + 1), count)
        bounds.append((first, end, int(starts[first]), int(starts[end])))
        first = end
    return bounds


def _labels(scores: torch.Tensor) -> torch.Tensor:
    """One draw per row of the unnormalised probabilities ``scores`` (rows, K): the first atom whose
    running total exceeds a uniform share of the row's total."""
    totals = scores.cumsum_(1)
    target = torch.rand(scores.shape[0], dtype=totals.dtype, device=totals.device) * totals[:, -1]
    labels = torch.searchsorted(totals, target[:, None], right=True)[:, 0]
    return labels.clamp_(max=scores.shape[1] - 1)


def sweep_labels(tokens: tuple, z, word_atom_counts, mixing, b, beta) -> None:
    """Steps 1a-1c (the module docstring): z (N,) redrawn in place, chunk by chunk. ``tokens`` = (x,
    groups, documents, starts, bounds): ``documents`` None, the group level (every token a document
    of its own); ``starts`` where each document starts, and N last; ``bounds`` the chunks
    (``chunks``); ``word_atom_counts`` n_kw (K, V), ``mixing`` D_t (T, K) and ``b``; every tensor on
    z's device."""
    x, groups, documents, starts, bounds = tokens
    k = mixing.shape[1]
    phi = draw_topics(word_atom_counts.T.contiguous(), beta).float()  # 1a, (V, K)
    group_weights = mixing.float()
    for first, end, lo, hi in bounds:
        if documents is None:
            weights = group_weights[groups[lo:hi]]
        else:  # 1b: theta_d of this chunk's documents
            local = documents[lo:hi] - first
            counts = torch.bincount(local * k + z[lo:hi], minlength=(end - first) * k).view(-1, k)
            theta = torch._standard_gamma(counts.to(mixing.dtype) + b * mixing[groups[starts[first:end]]])
            weights = (theta / theta.sum(1, keepdim=True)).float()[local]
        z[lo:hi] = _labels(weights.mul_(phi[x[lo:hi]]))  # 1c


def draw_tables(documents, groups, bounds, z, mixing, b) -> torch.Tensor:
    """Step 1d: m_tk (T, K), each token's table flag by Antoniak's scheme (the module docstring),
    chunk by chunk."""
    t, k = mixing.shape
    tables = torch.zeros(t * k, dtype=mixing.dtype, device=z.device)
    for first, _, lo, hi in bounds:
        labels, tokens_groups = z[lo:hi], groups[lo:hi]
        keys, order = torch.sort((documents[lo:hi] - first) * k + labels, stable=True)
        rank = torch.empty_like(order)
        rank[order] = torch.arange(len(keys), device=keys.device) - torch.searchsorted(keys, keys)
        prior = b * mixing[tokens_groups, labels]
        opened = torch.rand(len(labels), dtype=prior.dtype, device=z.device) * (prior + rank) < prior
        tables.index_add_(0, tokens_groups * k + labels, opened.to(tables.dtype))
    return tables.view(t, k)


def document_log_likelihood(documents, groups, starts, z, mixing, b) -> torch.Tensor:
    """ln p(z | D) with each theta_d integrated out, sum_d [ln G(b) - ln G(b + n_d) + sum_k
    (ln G(b D_t(k) + n_dk) - ln G(b D_t(k)))] (``gibbs.label_log_likelihood``), over the cells
    (d, k) that hold tokens, in torch on z's device."""
    k = mixing.shape[1]
    cells, counts = torch.unique(documents * k + z, return_counts=True)
    lengths = (starts[1:] - starts[:-1]).to(mixing.dtype)
    prior = b * mixing[groups[starts[cells // k]], cells % k]
    b = torch.as_tensor(b, dtype=mixing.dtype, device=mixing.device)
    return (len(lengths) * torch.lgamma(b) - torch.lgamma(b + lengths).sum()
            + (torch.lgamma(prior + counts.to(mixing.dtype)) - torch.lgamma(prior)).sum())
