"""Inheritance matrices q (groups x latent DPs) for the configurations of [Coupled-DP] section 5.

    s-ldp   one latent DP shared by every group, q = 0.5
    m-ldp   a local latent DP per group with q_ts = exp(-|t - s| / sigma), plus a global one
            every group inherits from with the same probability (0.5)
    sngp    local latent DPs with q_ts = 1 if |t - s| <= sigma else 0: without sub-sampling the
            model is the SNGP of section 3.2, D_t = sum_{s in R_t} c_ts H_s, c_t ~ Dir(alpha_{R_t})
    scenes  section 5.2's set-up (used for digits-bags): a local latent DP per group with q = 1,
            0.2 to the other groups' locals, and a global one at 0.5
"""

import torch


def _check_groups(num_groups):
    if int(num_groups) != num_groups or num_groups < 1:
        raise ValueError(f"the number of groups must be an integer >= 1, got {num_groups!r}")
    return int(num_groups)


def _distance(num_groups, dtype):
    t = torch.arange(_check_groups(num_groups), dtype=dtype)
    return (t[:, None] - t[None, :]).abs()


def s_ldp(num_groups, *, q=0.5, dtype=torch.float64):
    return torch.full((_check_groups(num_groups), 1), float(q), dtype=dtype)


def m_ldp(num_groups, *, sigma=1.0, global_q=0.5, dtype=torch.float64):
    if not sigma > 0:
        raise ValueError(f"sigma must be > 0, got {sigma!r}")
    local = torch.exp(-_distance(num_groups, dtype) / sigma)
    return torch.cat([local, torch.full((local.shape[0], 1), float(global_q), dtype=dtype)], 1)


def sngp(num_groups, *, sigma=1.0, dtype=torch.float64):
    if not sigma >= 0:
        raise ValueError(f"sigma must be >= 0, got {sigma!r}")
    return (_distance(num_groups, dtype) <= sigma).to(dtype)


def scenes(num_groups, *, local=1.0, other=0.2, global_q=0.5, dtype=torch.float64):
    eye = torch.eye(_check_groups(num_groups), dtype=dtype)
    locals_ = eye * local + (1 - eye) * other
    return torch.cat([locals_, torch.full((locals_.shape[0], 1), float(global_q), dtype=dtype)], 1)


CONFIGS = {"s-ldp": s_ldp, "m-ldp": m_ldp, "sngp": sngp, "scenes": scenes}


def inheritance_matrix(config, num_groups, **options) -> torch.Tensor:
    """q for a named configuration, or a user-given matrix (checked: groups x sources
    probabilities with a positive entry in every row)."""
    if isinstance(config, str):
        if config not in CONFIGS:
            raise ValueError(f"config must be one of {', '.join(CONFIGS)} or a q matrix, got {config!r}")
        return CONFIGS[config](num_groups, **options)
    q = torch.as_tensor(config, dtype=options.get("dtype", torch.float64))
    if q.ndim != 2 or q.shape[0] != num_groups:
        raise ValueError(f"a q matrix must be groups x sources with {num_groups} rows, got shape {tuple(q.shape)}")
    if not bool(torch.isfinite(q).all()) or not bool(((q >= 0) & (q <= 1)).all()) or not bool((q > 0).any(1).all()):
        raise ValueError("a q matrix must hold probabilities in [0, 1] with a positive entry in every row")
    return q
