"""ArviZ export and model comparison (the one module that imports ArviZ: everything else,
tests, tutorials and benchmarks included, calls ``arviz()``).

Written against arviz 0.x (``az.from_dict`` / ``az.compare``); 1.x dropped the Pyro converter.
"""

import warnings

import numpy as np
import torch


def arviz():
    """The ArviZ module, imported on first use (it is slow to import). ArviZ 0.23 warns about its
    1.x refactor on import once a day per machine (a stamp in the user's cache directory); the
    notice is not about anything the caller did, so it is silenced here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, module="arviz")
        import arviz

    return arviz


def inference_data(draws: dict, log_likelihood, observed: dict, *, dims: dict, bound=None):
    """ArviZ InferenceData of a VI fit: one chain of ``draws`` from the variational posterior (site
    name -> (S, ...) tensor), ``log_likelihood`` (a draw -> ln p(x_n | draw) for every observation,
    the assignments summed out, so LOO and WAIC apply), the ``observed`` data, and the bound at each
    evaluation of the fit (``sample_stats``, dimension ``evaluation``). ``dims`` names the
    dimensions of each variable after (chain, draw)."""
    num_draws = next(iter(draws.values())).shape[0]
    log_lik = torch.stack([log_likelihood({name: value[s] for name, value in draws.items()})
                           for s in range(num_draws)])
    as_chain = lambda t: t.detach().cpu().numpy()[None]
    idata = arviz().from_dict(
        posterior={name: as_chain(value) for name, value in draws.items()},
        log_likelihood={"x": as_chain(log_lik)},
        observed_data={name: np.asarray(value) for name, value in observed.items()},
        dims={**dims, "x": ["sample"]},
    )
    if bound is not None:
        import xarray

        idata.add_groups(sample_stats=xarray.Dataset({"elbo": ("evaluation", np.asarray(bound, dtype=float))}))
    return idata


def check_num_draws(num_draws) -> int:
    if isinstance(num_draws, bool) or not isinstance(num_draws, (int, np.integer)) or num_draws < 1:
        raise ValueError(f"num_draws must be an integer >= 1, got {num_draws!r}")
    return int(num_draws)


def compare(fitted: dict, X, groups=None, *, labels=None, ic: str = "loo", num_draws: int = 200,
            random_state: int | None = 0):
    """ArviZ's comparison table (PSIS-LOO by default) for fitted estimators on the same data, any
    model family, best first, with the clusters each fit uses on X (``clusters``) and, when the true
    ``labels`` are given, ``nmi`` and ``acc`` as extra columns.

    Every model's ``log_likelihood`` is a density of X itself, so the ELPDs compare.

    Parameters
    ----------
    fitted : {name: a fitted estimator with ``to_arviz``}, at least two.
    X : the data they are compared on.
    groups : the rows' groups, for the models that fit grouped rows (HDPGD).
    labels : true labels of X, optional: adds the ``nmi`` and ``acc`` columns.
    ic : "loo" (PSIS-LOO, default) or "waic".
    num_draws : posterior draws a model.
    random_state : the draws' seed.

    Returns
    -------
    pandas.DataFrame: ArviZ's ``compare`` table, one row a model, best first, with ``clusters``
    (and ``nmi``, ``acc``).
    """
    import inspect

    from bnpzoo.metrics import acc, clusters_used, nmi

    if len(fitted) < 2:
        raise ValueError("compare needs at least two fitted estimators")
    data, extra = {}, {}
    for name, est in fitted.items():
        grouped = (groups,) if "groups" in inspect.signature(est.to_arviz).parameters else ()
        data[name] = est.to_arviz(X, *grouped, num_draws=num_draws, random_state=random_state)
        pred = est.predict(X, *grouped)
        extra[name] = {"clusters": clusters_used(pred)}
        if labels is not None:
            extra[name].update(nmi=nmi(labels, pred), acc=acc(labels, pred))
    with warnings.catch_warnings():
        # arviz 0.23 calls a pandas API that pandas 3.1 deprecates; not ours to act on
        warnings.filterwarnings("ignore", message="The inplace keyword in DataFrame")
        table = arviz().compare(data, ic=ic)
    for column in next(iter(extra.values())):
        table[column] = [extra[name][column] for name in table.index]
    return table


RHAT_LIMIT = 1.1  # above it, the chains have not mixed (``check_mixing``)
SAME_NUMBER = 1e-9  # relative spread of draws that is summation order, not movement


def chain_rhat(chains: np.ndarray) -> float:
    """R-hat of one quantity's draws (chains, draws): ArviZ's rank-normalised split R-hat; 1 where
    every draw of every chain is the same number to rounding (a partition that no chain left), and
    infinite where each half-chain holds one value but they differ (chains stuck apart: ArviZ's
    0 / 0)."""
    chains = np.asarray(chains, dtype=np.float64)
    if chains.shape[0] == 1:  # one chain: its halves as two (ArviZ asks for two chains)
        chains = chains[:, : chains.shape[1] // 2 * 2].reshape(2, -1)
    if np.ptp(chains) <= SAME_NUMBER * max(1.0, float(np.abs(chains).max())):
        return 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        rhat = float(arviz().rhat(chains))
    return rhat if np.isfinite(rhat) else np.inf


def mixing(samples: dict, names, sweeps: int) -> tuple[dict, str | None]:
    """R-hat of each of ``names`` in ``samples`` (name -> (chains, draws)), and where one is above
    ``RHAT_LIMIT`` why the chains have not mixed, with the sweeps per chain (of ``sweeps`` run) that
    would give about 100 effective draws at the rate these chains decorrelated (None: they mixed)."""
    rhat = {name: chain_rhat(samples[name]) for name in names}
    worst = max(rhat, key=lambda name: rhat[name] if np.isfinite(rhat[name]) else np.inf)
    if not rhat[worst] > RHAT_LIMIT:
        return rhat, None
    draws = np.asarray(samples[worst], dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        ess = float(arviz().ess(draws))
    needed = int(np.ceil(sweeps * 100 / (ess if np.isfinite(ess) and ess > 1 else 1.0)))
    return rhat, (f"the {draws.shape[0]} chains have not mixed: R-hat of the {worst.replace('_', ' ')} is "
                  f"{rhat[worst]:.2f} (above {RHAT_LIMIT}) and its effective sample size {ess:.0f}; fit again with "
                  f"about max_iter={needed} sweeps per chain")


def check_mixing(samples: dict, names, sweeps: int, stacklevel: int = 6) -> dict:
    """``mixing``'s R-hat, and its reason as a ConvergenceWarning where the chains have not mixed."""
    from bnpzoo.base import ConvergenceWarning

    rhat, reason = mixing(samples, names, sweeps)
    if reason is not None:
        warnings.warn(reason, ConvergenceWarning, stacklevel=stacklevel)
    return rhat
