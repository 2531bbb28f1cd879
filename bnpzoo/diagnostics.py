"""ArviZ export and model comparison (the one module that imports ArviZ: everything else,
tests, tutorials and benchmarks included, calls ``arviz()``).

Written against arviz 0.x (``az.from_dict`` / ``az.compare``); 1.x dropped the Pyro converter.
"""

import warnings

import torch


def arviz():
    """The ArviZ module, imported on first use (it is slow to import). ArviZ 0.23 warns about its
    1.x refactor on import once a day per machine (a stamp in the user's cache directory); the
    notice is not about anything the caller did, so it is silenced here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, module="arviz")
        import arviz

    return arviz


def inference_data(estimator, x: torch.Tensor, draws: dict):
    """One chain of posterior draws, the pointwise log predictive of each draw, the data."""
    num_draws = next(iter(draws.values())).shape[0]
    log_lik = torch.stack([
        estimator._draw_log_likelihood(x, {name: value[s] for name, value in draws.items()})
        for s in range(num_draws)
    ])
    as_chain = lambda t: t.detach().cpu().numpy()[None]
    return arviz().from_dict(
        posterior={name: as_chain(value) for name, value in draws.items()},
        log_likelihood={"x": as_chain(log_lik)},
        observed_data={"x": x.cpu().numpy()},
        dims={"mu": ["cluster", "feature"], "weights": ["cluster"], "x": ["sample"]},
    )


def compare(fitted: dict, X, *, ic: str = "loo", num_draws: int = 200, random_state: int | None = 0):
    """ArviZ's comparison table (PSIS-LOO by default) for fitted estimators on the same data.

    ``fitted`` maps a name to a fitted estimator; ``X`` is the data they are compared on.
    """
    if len(fitted) < 2:
        raise ValueError("compare needs at least two fitted estimators")
    data = {name: est.to_arviz(X, num_draws=num_draws, random_state=random_state) for name, est in fitted.items()}
    with warnings.catch_warnings():
        # arviz 0.23 calls a pandas API that pandas 3.1 deprecates; not ours to act on
        warnings.filterwarnings("ignore", message="The inplace keyword in DataFrame")
        return arviz().compare(data, ic=ic)
