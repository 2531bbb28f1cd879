"""Pyro's SVI on the HDP-GD program itself (``models.hdp_gd``, or a user's edited copy of it): the
guide of ``guides.hdp_gd`` learns the global mean-field factors ([HDP-GD] eq. (22)-(26): Beta
sticks and saliencies, Categorical q(W), Gamma Beta-parameters) and the program's own row sites
are summed out exactly, the group atom z_n and every relevance phi_nl (``TraceEnum_ELBO``; the
program marks them for enumeration). The bound is therefore at least the mean-field one of the
closed-form learners at the same global factors (q(z, phi | x) is the exact conditional, not a
product of factors); the closed-form learners are checked against it in ``tests/test_hdp_gd.py``.

Gradients: the Beta and Gamma factors are reparametrised (pathwise). q(W) cannot be summed out
(a row's likelihood depends on W through its group and its z, outside W's plates), and the
score-function estimator that ``TraceEnum_ELBO`` would apply to it carries every row's likelihood
as its cost: Adam's steps on that noise flattened q(W) and merged every cluster into one. The
guide draws W by the straight-through Gumbel-softmax instead (``guides.hdp_gd.StraightThroughOneHot``:
an exact one-hot draw, a relaxed gradient), which the program's one-hot W takes by a matrix product.
The steps are ``inference.svi.run_svi``'s with Adam, on the whole data (``batch_size`` None) or on
minibatches, which the program's plate subsamples (``subsample_size``), from ``start``: ``HDPGD``
gives batch vi's fit of the shipped program, which an edited program then moves from.
"""

from functools import partial

import torch
from pyro.infer import TraceEnum_ELBO

from bnpzoo.guides.hdp_gd import guide, learned_factors
from bnpzoo.inference import optim as optimizers
from bnpzoo.inference.hdp_gd.updates import Globals
from bnpzoo.inference.svi import Schedule, SVIProgram, run_svi

FLOOR = 1e-6  # q(W) starts off the simplex's edge (the K-means start gives exact zeros)


def fit_svi(model, x: torch.Tensor, groups: torch.Tensor, start: Globals, *, model_kwargs: dict, schedule: Schedule,
            learning_rate: float, verbose: bool = False):
    """SVI steps of ``model`` (called ``model(x, groups=..., subsample_size=..., **model_kwargs)``)
    with the learned mean-field guide, from ``start``, in Pyro's current param store.

    Parameters
    ----------
    model : the program; x (N, D) its observations (transformed, in (0, 1)); groups (N,) their groups.
    start : the first global factors. model_kwargs : the program's keyword arguments.
    schedule, verbose : as ``inference.svi.run_svi``; learning_rate : Adam's step.

    Returns
    -------
    (the learned global factors, the ``SVIRun``: the bound every 10 steps, steps, converged).
    """
    theta = start.theta.clamp_min(FLOOR)
    start = start.replace(theta=theta / theta.sum(-1, keepdim=True))
    loss = TraceEnum_ELBO(max_plate_nesting=2).differentiable_loss
    program = SVIProgram(model, partial(guide, start=start), optimizers.adam(learning_rate),
                         dict(model_kwargs, groups=groups), loss)
    run = run_svi(program, x, schedule, verbose=verbose)
    learned = learned_factors(start)  # read back from Pyro's param store; detached, as plain tensors
    return learned.replace(**{name: getattr(learned, name).detach() for name in Globals.__dataclass_fields__}), run
