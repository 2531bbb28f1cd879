"""Tensor kernels shared by the models and the learners.

Everything here is device- and dtype-agnostic and never builds an N x K x D tensor.
"""

import math

import torch


def clamp_probs(p: torch.Tensor) -> torch.Tensor:
    """Keep probabilities inside (0, 1) so that log(p) and log(1 - p) stay finite."""
    eps = torch.finfo(p.dtype).eps
    return p.clamp(eps, 1 - eps)


def stick_breaking_log_weights(sticks: torch.Tensor) -> torch.Tensor:
    """log pi_k = log v_k + sum_{l<k} log(1 - v_l), with the last stick fixed to 1.

    ``sticks`` holds the K - 1 free sticks v_1..v_{K-1} in its last dimension; the result has K
    entries (seed 002 section 2.1: pi_k = v_k prod_{l<k} (1 - v_l)).
    """
    v = clamp_probs(sticks)
    zero = v.new_zeros(v.shape[:-1] + (1,))
    log_v = torch.cat([v.log(), zero], dim=-1)
    log_rest = torch.cat([zero, torch.log1p(-v).cumsum(-1)], dim=-1)
    return log_v + log_rest


def weights_to_sticks(weights: torch.Tensor) -> torch.Tensor:
    """Invert stick breaking: v_k = pi_k / (1 - sum_{l<k} pi_l), for the K - 1 free sticks."""
    remaining = 1 - torch.cat([weights.new_zeros(1), weights.cumsum(0)[:-1]])
    return (weights / remaining.clamp_min(torch.finfo(weights.dtype).tiny))[:-1].clamp(0, 1)


def squared_distances(x: torch.Tensor, means: torch.Tensor) -> torch.Tensor:
    """|x_n - mu_k|^2 for all pairs, (N, K), through one matrix product."""
    sq = (x * x).sum(-1, keepdim=True) - 2 * x @ means.T + (means * means).sum(-1)
    return sq.clamp_min(0)


def spherical_normal_log_density(x: torch.Tensor, means: torch.Tensor, sigma) -> torch.Tensor:
    """log N(x_n | mu_k, sigma^2 I) for all pairs, (N, K)."""
    d = x.shape[-1]
    sigma = torch.as_tensor(sigma, dtype=x.dtype, device=x.device)
    log_norm = -0.5 * d * torch.log(2 * torch.pi * sigma**2)
    return log_norm - squared_distances(x, means) / (2 * sigma**2)


def softmax_(table: torch.Tensor) -> torch.Tensor:
    """Row-wise softmax in place (no temporaries the size of ``table``); returns ``table``.

    Exponents are floored at ln(tiny) + 16, tiny the smallest normal number of the dtype: exp of a
    very negative number is subnormal, and subnormal arithmetic is about 100 times slower on CPUs
    (exp and the division by the row sum, which is at most K < e^16, both stay normal). A
    probability below e^16 tiny (1e-31 in float32) is reported as about that instead of 0.
    """
    floor = math.log(torch.finfo(table.dtype).tiny) + 16
    table.sub_(table.amax(1, keepdim=True)).clamp_(min=floor).exp_()
    return table.div_(table.sum(1, keepdim=True))


def tail_sums(counts: torch.Tensor) -> torch.Tensor:
    """sum_{j>k} counts_j for every k (the mass to the right of each stick)."""
    return counts.flip(-1).cumsum(-1).flip(-1) - counts


def _largest_eigenvalue(sym: torch.Tensor, steps: int = 50) -> torch.Tensor:
    """Power iteration for the top eigenvalue of a symmetric PSD matrix (device-friendly)."""
    v = torch.ones(sym.shape[0], dtype=sym.dtype, device=sym.device)
    tiny = torch.finfo(sym.dtype).tiny
    for _ in range(steps):
        w = sym @ v
        v = w / w.norm().clamp_min(tiny)  # a zero matrix keeps v = 0 and returns 0
    return v @ sym @ v


def default_sigma(x: torch.Tensor, centres: torch.Tensor, labels: torch.Tensor, *, within_factor: float = 3.0,
                  max_rows: int = 20000) -> torch.Tensor:
    """Data-driven scale for the shared spherical component variance, from the K-means start.

        sigma^2 = min( ||C||_F^2 / tr(C),  within_factor * lambda_max(W) )

    C is the covariance of the data: ||C||_F^2 / tr(C) = sum lambda_i^2 / sum lambda_i is the total
    variance spread over the effective number of dimensions (the participation ratio
    (sum lambda)^2 / sum lambda^2). W is the pooled within-cluster covariance left by the K-means
    initialisation (``centres``, ``labels``) and lambda_max(W) its largest eigenvalue.

    Why not the within-cluster variance the model assumes? With a fixed spherical sigma the
    likelihood grows with D while the stick-breaking prior's say is O(log K): at the model-true
    scale every K-means cluster of the initialisation survives, and two equal clusters whose
    means are closer than about sqrt(8 ln 2) sigma merge. The first term is the coarsest scale
    that still resolves the data's own spread (it is what digits needs: elongated classes in 64
    dimensions); the second keeps well-separated compact clusters apart (a cluster is split
    along its main axis only while sigma^2 < (2 / pi) lambda_max / (2 ln 2), about half its
    variance there; K-means at the truncation level over-splits, hence the factor 3). Checked on
    digits, standardised iris, wine and breast cancer, and blobs (tests and the benchmark).
    Rows beyond ``max_rows`` are subsampled (evenly spaced) to keep the cost O(max_rows D^2).
    """
    if x.shape[0] > max_rows:
        rows = torch.linspace(0, x.shape[0] - 1, max_rows, device=x.device).long()
        x, labels = x[rows], labels[rows]
    xc = x - x.mean(0)
    cov = xc.T @ xc / max(x.shape[0] - 1, 1)
    total = torch.diagonal(cov).sum()
    if total <= 0:  # every row identical: any positive scale will do
        return torch.ones((), dtype=x.dtype, device=x.device)
    residual = x - centres[labels]
    within = _largest_eigenvalue(residual.T @ residual / x.shape[0])
    spread = (cov * cov).sum() / total
    return torch.minimum(spread, within_factor * within).clamp_min(torch.finfo(x.dtype).tiny).sqrt()
