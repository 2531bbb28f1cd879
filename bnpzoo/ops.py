"""Tensor kernels shared by the models and the learners, and the generator states a resumable
learner saves (``get_rng_state``, ``set_rng_state``).

Everything here is device- and dtype-agnostic and builds an N x K x D table only a block of rows at a
time (``row_blocks``).
"""

import math
import random

import numpy as np
import torch


def clamp_probs(p: torch.Tensor) -> torch.Tensor:
    """Keep probabilities inside (0, 1) so that log(p) and log(1 - p) stay finite."""
    eps = torch.finfo(p.dtype).eps
    return p.clamp(eps, 1 - eps)


def stick_breaking_log_weights(sticks: torch.Tensor) -> torch.Tensor:
    """log pi_k = log v_k + sum_{l<k} log(1 - v_l), with the last stick fixed to 1.

    ``sticks`` holds the K - 1 free sticks v_1..v_{K-1} in its last dimension; the result has K
    entries ([DPM-SGA] section 2.1: pi_k = v_k prod_{l<k} (1 - v_l)).
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


def stick_parameters(n_sticks: int, alpha, discount=0.0, *, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(a_k, b_k) of the Beta(a_k, b_k) sticks k = 1..n_sticks of a Pitman-Yor process:
    a_k = 1 - d, b_k = alpha + k d, 0 <= d < 1, alpha > -d ([PYPM-sVMM] eq. (1)); d = 0 is the
    Dirichlet process's Beta(1, alpha) ([DPM-SGA] section 2.1). On ``like``'s device and dtype."""
    k = torch.arange(1, n_sticks + 1, dtype=like.dtype, device=like.device)
    return torch.full_like(k, 1.0 - discount), alpha + k * discount


def conjugate_sticks(counts: torch.Tensor, alpha, discount=0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(c1, c0) of q(v_k) = Beta(a_k + N_k, b_k + N_{>k}), the sticks' conjugate posterior given
    the K clusters' counts N_k in stick order (K - 1 free sticks; the last dimension, batched)."""
    a, b = stick_parameters(counts.shape[-1] - 1, alpha, discount, like=counts)
    return a + counts[..., :-1], b + tail_sums(counts)[..., :-1]


BLOCK_ENTRIES = 1 << 20  # a block's N x K table: 4 MiB in float32, reused by the allocator, not refaulted
DEVICE_BLOCK_ENTRIES = 1 << 24  # on an accelerator: 64 MiB tables, so that a pass is a few launches


def row_blocks(n: int, k: int, entries: int | None = None, device=None):
    """Slices of at most max(1, entries // k) rows covering range(n): passes over the data whose
    per-block table (rows x k) stays small (on 1,000,000 x 64 against 100 clusters, full N x K
    tables every iteration cost 307 s of system time in page faults of 552 s). ``entries`` defaults
    to ``BLOCK_ENTRIES`` on the CPU and ``DEVICE_BLOCK_ENTRIES`` on the tensors' ``device`` otherwise
    (a GPU's kernel launches cost more than its memory)."""
    if entries is None:
        on_cpu = device is None or torch.device(device).type == "cpu"
        entries = BLOCK_ENTRIES if on_cpu else DEVICE_BLOCK_ENTRIES
    rows = max(1, entries // max(k, 1))
    return [slice(start, min(start + rows, n)) for start in range(0, n, rows)]


def squared_distances(x: torch.Tensor, means: torch.Tensor) -> torch.Tensor:
    """|x_n - mu_k|^2 for all pairs, (N, K), through one matrix product."""
    sq = (x * x).sum(-1, keepdim=True) - 2 * x @ means.T + (means * means).sum(-1)
    return sq.clamp_min(0)


def generalized_gaussian_shape(std, rho: float):
    """s of GGD(x | B, s, rho) with standard deviation ``std``: the variance is
    s^2 Gamma(3/rho) / Gamma(1/rho), so s = std sqrt(Gamma(1/rho) / Gamma(3/rho)) (sqrt(2) std at rho = 2)."""
    return std * math.exp(0.5 * (math.lgamma(1 / rho) - math.lgamma(3 / rho)))


def generalized_gaussian_log_density(x: torch.Tensor, means: torch.Tensor, std, rho: float = 2.0, *,
                                     paired: bool = False) -> torch.Tensor:
    """ln prod_d GGD(x_nd | mu_kd, s_d, rho) for all pairs, (N, K), each feature with standard
    deviation ``std`` (a scalar or one per feature) and s from ``generalized_gaussian_shape``
    ([PYPM-sVMM] eq. (2), normaliser rho / (2 s Gamma(1/rho))); ``paired``: x_n against its own
    mean, ``means`` (N, D), the diagonal of that table, (N,), where ``std`` may also be each row's
    own, (N, D).

    rho = 2 is the Gaussian, ln N(x_n | mu_k, diag(std^2)), through one matrix product; any other
    rho goes through ``torch.cdist(x / s, mu / s, p=rho) ** rho``. Never an N x K x D tensor.
    """
    d = x.shape[-1]
    std = torch.as_tensor(std, dtype=x.dtype, device=x.device)
    std = std.expand(*std.shape[:-1], d) if std.dim() else std.expand(d)
    if rho == 2.0:
        log_norm = -0.5 * d * math.log(2 * math.pi) - std.log().sum(-1)
        if paired:
            return log_norm - 0.5 * ((x - means) / std).pow(2).sum(-1)
        return log_norm - 0.5 * squared_distances(x / std, means / std)
    s = generalized_gaussian_shape(std, rho)
    log_norm = d * (math.log(rho / 2) - math.lgamma(1 / rho)) - s.log().sum(-1)
    if paired:
        return log_norm - ((x - means).abs() / s).pow(rho).sum(-1)
    return log_norm - torch.cdist(x / s, means / s, p=rho).pow(rho)


def generalized_gaussian_std(tau: torch.Tensor, rho: float) -> torch.Tensor:
    """The standard deviation of GGD(x | B, s, rho) with tau = s^-rho (``families.learned_scale``):
    tau^(-1/rho) sqrt(Gamma(3/rho) / Gamma(1/rho)), ``generalized_gaussian_shape``'s inverse."""
    return tau ** (-1 / rho) / generalized_gaussian_shape(1.0, rho)


def generalized_gaussian_table(x: torch.Tensor, means: torch.Tensor, std: torch.Tensor, rho: float, *,
                               smoothing: torch.Tensor | None = None) -> torch.Tensor:
    """ln prod_d GGD(x_nd | mu_kd, s_kd, rho) for all pairs, (N, K), with a standard deviation per
    cluster and feature ``std`` (K, D) (s from ``generalized_gaussian_shape``), in blocks of rows
    (an N x K x D tensor a block at a time); ``smoothing`` (K, D) replaces |x - mu|^rho by ((x - mu)^2 +
    smoothing)^(rho/2) (``families.learned_scale``: the bound under a Gaussian factor of the means)."""
    s = generalized_gaussian_shape(std, rho)
    log_norm = (x.shape[-1] * (math.log(rho / 2) - math.lgamma(1 / rho)) - s.log().sum(-1))
    table = x.new_empty(x.shape[0], means.shape[0])
    for rows in row_blocks(x.shape[0], means.numel(), device=x.device):
        gap = (x[rows, None, :] - means) ** 2
        gap = gap if smoothing is None else gap + smoothing
        table[rows] = log_norm - (gap ** (0.5 * rho) / s**rho).sum(-1)
    return table


def diagonal_gaussian_log_density(x: torch.Tensor, means: torch.Tensor, precisions: torch.Tensor) -> torch.Tensor:
    """ln N(x_n | mu_k, diag(1 / P_k)) for all pairs, (N, K), with a precision per cluster and feature
    (``precisions`` (K, D)): three matrix products, sum_d P_kd (x_nd^2 - 2 x_nd mu_kd + mu_kd^2)."""
    quadratic = (x * x) @ precisions.T - 2 * x @ (precisions * means).T + (precisions * means * means).sum(1)
    return 0.5 * (precisions.log().sum(1) - x.shape[-1] * math.log(2 * math.pi) - quadratic)


def full_gaussian_log_density(x: torch.Tensor, means: torch.Tensor, precision_factor: torch.Tensor) -> torch.Tensor:
    """ln N(x_n | mu_k, (F_k F_k^T)^-1) for all pairs, (N, K), from triangular square roots F_k of the
    precisions (``precision_factor`` (K, D, D), F_k F_k^T = Lambda_k): |F_k^T (x_n - mu_k)|^2 for every
    cluster from one matrix product a block of rows, x [F_1 ... F_K] - [mu_1 F_1 ... mu_K F_K] (rows x
    K D, ``row_blocks``), and ln |Lambda_k| / 2 from the factors' diagonals. Rows and means are
    centred on the means' average first, so that the difference of the two products keeps its digits
    for data far from zero."""
    k, d = means.shape
    centre = means.mean(0)
    x, means = x - centre, means - centre
    stacked = precision_factor.transpose(0, 1).reshape(d, k * d)  # column block k is F_k
    shift = torch.einsum("kd,kde->ke", means, precision_factor).reshape(k * d)
    out = x.new_empty(x.shape[0], k)
    for rows in row_blocks(x.shape[0], k * d, device=x.device):
        projected = torch.addmm(shift, x[rows], stacked, beta=-1)
        out[rows] = projected.view(-1, k, d).pow_(2).sum(-1)
    half_log_det = precision_factor.diagonal(dim1=-2, dim2=-1).abs().log().sum(-1)
    return out.mul_(-0.5).add_(half_log_det - 0.5 * d * math.log(2 * math.pi))


def weighted_scatter(x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """sum_n w_nk x_n x_n^T for every cluster, (K, D, D) in float64: one matrix product a block of
    rows, [w_n1 x_n ... w_nK x_n]^T (K D x rows, ``row_blocks``) times the block, each block's product
    in the data's precision and their sum in float64."""
    k, d = weights.shape[1], x.shape[1]
    scatter = torch.zeros(k * d, d, dtype=torch.float64, device=x.device)
    for rows in row_blocks(x.shape[0], k * d, device=x.device):
        block = x[rows]
        scatter += ((weights[rows, :, None] * block[:, None, :]).reshape(-1, k * d).T @ block).double()
    return scatter.view(k, d, d)


def bernoulli_log_density(x: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """ln prod_d Bernoulli(x_nd | p_kd) for all pairs, (N, K): one matrix product,
    x (ln p - ln(1 - p))^T + sum_d ln(1 - p_kd); ``probs`` (K, D) are kept inside (0, 1)."""
    p = clamp_probs(probs)
    return x @ (p.log() - torch.log1p(-p)).T + torch.log1p(-p).sum(1)


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


MIN_SCALE_FRACTION = 1e-4  # default_sigma^2 >= this times the data's spread: sigma >= 1% of its scale


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
    sigma^2 is never below ``MIN_SCALE_FRACTION`` times the first term: on a start with a cluster
    per row (data no larger than the truncation) or clusters of identical rows, lambda_max(W) is
    0, and a scale of 1e-19 made every density overflow.

    With fewer rows than features, lambda_max(W) is taken times N / D: N residuals span at most N
    of the D directions, so the largest eigenvalue holds the spread of about D / N features
    (noise of variance s^2 per feature gives lambda_max about s^2 (1 + sqrt(D / N))^2 even
    where W has no main axis). Uncorrected, 20 rows of two clusters 318 sd apart in 2,000
    features got sigma^2 = 323 (the noise's is 1), and the bound preferred one cluster.
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
    within = _largest_eigenvalue(residual.T @ residual / x.shape[0]) * min(1.0, x.shape[0] / x.shape[1])
    spread = (cov * cov).sum() / total
    floor = MIN_SCALE_FRACTION * spread  # within is 0 when K-means gives every row its own cluster
    scale = torch.minimum(spread, torch.maximum(within_factor * within, floor))
    return scale.clamp_min(torch.finfo(x.dtype).tiny).sqrt()


def relative_spreads(x: torch.Tensor, *, cap: float = 2.0, max_rows: int = 20000) -> torch.Tensor:
    """Per-feature factors r_d >= 1 for the component scale, sigma_d = sigma r_d: a feature whose
    standard deviation exceeds ``cap`` times the median feature's gets r_d = sd_d / (cap median),
    every other feature r_d = 1.

    Features in different units (wine: proline spans 278 to 1680, hue 0.48 to 1.71) would drown
    each other under one shared scale; scaling the widest down to twice the median puts them on
    a footing. Features in one unit keep their relative spreads: scaling each feature to unit
    spread would blow up nearly constant ones (digits' border pixels), and scaling up the narrow
    ones lets their noise count as much as the signal of the others. Measured on digits, iris,
    wine, breast cancer (raw) and blobs whose features were multiplied by factors from 0.01 to
    1000 (``benchmarks/reports/pyp_ggm.md``).
    """
    if x.shape[0] > max_rows:
        x = x[torch.linspace(0, x.shape[0] - 1, max_rows, device=x.device).long()]
    sd = x.std(0) if x.shape[0] > 1 else torch.zeros_like(x[0])
    positive = sd[sd > 0]
    if positive.numel() == 0:
        return torch.ones_like(sd)
    return (sd / (cap * positive.median())).clamp_min(1.0)


def remaining_mass(y: torch.Tensor, remainder: torch.Tensor | None = None) -> torch.Tensor:
    """1 - sum_{f<l} Y_f for every l, in float64, from the tail: remainder + sum_{f>=l} Y_f with
    remainder = 1 - sum_l Y_l (computed once in float64 unless given)."""
    wide = y.to(torch.float64)
    rest = 1 - wide.sum(-1) if remainder is None else remainder.to(torch.float64)
    return rest.unsqueeze(-1) + wide.flip(-1).cumsum(-1).flip(-1)


def geometric_transform(y: torch.Tensor, remainder: torch.Tensor | None = None) -> torch.Tensor:
    """[HDP-GD] eq. (11): X_1 = Y_1, X_l = Y_l / (1 - sum_{f<l} Y_f), which turns a generalized
    Dirichlet vector into independent Beta coordinates.

    The remaining mass 1 - sum_{f<l} Y_f is taken from the tail, remainder + sum_{f>=l} Y_f (a
    reversed cumulative sum in float64), never as 1 minus a running sum: late coordinates of a
    long vector are tiny, and 1 - cumsum cancels to 0 or garbage in float32. ``remainder`` is
    1 - sum_l Y_l, the mass beyond the D coordinates; pass it when it is known exactly (the last
    part of a full composition); by default it is computed once, in float64.
    """
    return (y.to(torch.float64) / remaining_mass(y, remainder)).to(y.dtype)


def inverse_geometric_transform(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverse of ``geometric_transform``: Y_l = X_l prod_{f<l} (1 - X_f), through a cumulative sum
    of log1p(-X). Returns (Y, remainder) with remainder = prod_l (1 - X_l) = 1 - sum_l Y_l."""
    log_rest = torch.log1p(-x).cumsum(-1)
    before = torch.cat([torch.zeros_like(log_rest[..., :1]), log_rest[..., :-1]], -1)
    return x * before.exp(), log_rest[..., -1].exp()


def log_remaining_mass(y: torch.Tensor, remainder: torch.Tensor | None = None) -> torch.Tensor:
    """sum_{l>=2} ln(1 - sum_{f<l} Y_f) per row: minus the log-Jacobian of ``geometric_transform``
    (dX_l / dY_l = 1 / (1 - sum_{f<l} Y_f), a triangular Jacobian), from the tail as there."""
    return remaining_mass(y, remainder)[..., 1:].log().sum(-1).to(y.dtype)


def normalise_histograms(h: torch.Tensor, floor: float) -> torch.Tensor:
    """Non-negative histograms (rows of D bins) to compositions strictly inside the simplex, D + 1
    parts summing to 1: part l = (h_l + c) / (sum_f h_f + (D + 1) c) and the last part
    c / (sum_f h_f + (D + 1) c), c = floor * sum_f h_f / D (c = floor for an empty row): every bin
    and the extra part get ``floor`` times the row's mean bin ([HDP-GD] models proportions, and a
    part of 0 has no Beta density). The last part is the remainder 1 - sum Y of the D proportions,
    given exactly (``geometric_transform``'s ``remainder``)."""
    total = h.sum(-1, keepdim=True)
    c = torch.where(total > 0, floor * total / h.shape[-1], torch.full_like(total, floor))
    return torch.cat([h + c, c], -1) / (total + (h.shape[-1] + 1) * c)


def get_rng_state() -> dict:
    """torch's, Python's and numpy's generator states, numpy's as a tensor (a weights-only file): what
    a resumable fit saves of where its stream stands. ``set_rng_state`` puts them back."""
    kind, keys, position, has_gauss, cached = np.random.get_state()
    return {"torch": torch.get_rng_state(), "random": random.getstate(),
            "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), position, has_gauss, cached)}


def set_rng_state(state: dict) -> None:
    kind, keys, position, has_gauss, cached = state["numpy"]
    torch.set_rng_state(state["torch"].cpu())  # CPU generators' states, wherever a load mapped them
    random.setstate(state["random"])
    np.random.set_state((kind, keys.cpu().numpy().astype(np.uint32), position, has_gauss, cached))
