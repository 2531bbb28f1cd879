"""The generic learner: ``pyro.infer.SVI`` over any model + guide, full batch or minibatches.

Assignments are summed out by ``TraceEnum_ELBO`` (the model marks them for enumeration), so a
MAP guide turns this into gradient ascent on ln p(x, theta) with z marginalised. Minibatches are
the model's ``subsample_size`` keyword, so Pyro scales the likelihood by N / M. Convergence is
judged on the relative change of the mean bound between two successive windows of steps, which
is robust to the noise of minibatch estimates.
"""

from dataclasses import dataclass, field

import pyro
from pyro.infer import SVI, TraceEnum_ELBO
from tqdm.auto import tqdm


@dataclass
class SVIRun:
    elbo_trace: list[float] = field(default_factory=list)
    n_iter: int = 0
    converged: bool = False


def run_svi(
    model,
    guide,
    data,
    *,
    model_kwargs: dict,
    optim: pyro.optim.PyroOptim,
    loss=None,
    max_iter: int = 1000,
    batch_size: int | None = None,
    tol: float = 1e-5,
    window: int = 20,
    verbose: bool = False,
) -> SVIRun:
    """Run SVI until the windowed relative change of the bound is below ``tol``."""
    svi = SVI(model, guide, optim, loss if loss is not None else TraceEnum_ELBO(max_plate_nesting=1))
    run = SVIRun()
    with tqdm(total=max_iter, disable=not verbose, desc="svi", unit="step") as bar:
        for step in range(max_iter):
            run.elbo_trace.append(-svi.step(data, subsample_size=batch_size, **model_kwargs))
            run.n_iter = step + 1
            bar.update(1)
            if step % window == window - 1:
                bar.set_postfix(elbo=f"{run.elbo_trace[-1]:.5g}")
                if step >= 2 * window - 1:
                    now = sum(run.elbo_trace[-window:]) / window
                    before = sum(run.elbo_trace[-2 * window : -window]) / window
                    if abs(now - before) <= tol * abs(before):
                        run.converged = True
                        break
    return run
