"""Every VI fit exports to ArviZ with a pointwise log predictive that is the Pyro program's own
(its assignments summed out by enumerating the program), LOO works on it, and ``compare`` ranks a
correctly specified model above a misspecified one."""

import itertools

import numpy as np
import pytest
import torch
from pyro import poutine
from pyro.infer import config_enumerate

import bnpzoo
from bnpzoo import DPGMM, HDPGD, PYPGGM
from bnpzoo.data import hdp_gd_sample
from bnpzoo.diagnostics import arviz
from bnpzoo.models.hdp_gd import model as hdp_gd_model
from bnpzoo.ops import geometric_transform

DRAWS_CHECKED = (0, 7, 19)


def stick_program_log_predictive(est, x, draw):
    """ln p(x_n | v, mu[, precision]) from the estimator's program: z enumerated, x's and z's
    log-probabilities summed over the enumerated clusters."""
    sites = {name: draw[name] for name in ("v", "mu", "precision") if name in draw}
    fixed = poutine.condition(est._program(), data=sites)
    kwargs = dict(est._program_kwargs(est.scale_, prior_mean=0.0), truncation=est.n_clusters_)
    trace = poutine.trace(poutine.enum(config_enumerate(fixed), first_available_dim=-2)).get_trace(x, **kwargs)
    trace.compute_log_prob()
    joint = trace.nodes["z"]["log_prob"] + trace.nodes["x"]["log_prob"]  # (K, N)
    return torch.logsumexp(joint, 0)


def _posterior_draw(idata, s):
    return {name: torch.as_tensor(idata.posterior[name].values[0, s]) for name in idata.posterior.data_vars}


@pytest.mark.parametrize("make", [lambda: DPGMM(truncation=10, random_state=0),
                                  lambda: PYPGGM(truncation=10, max_iter=200, random_state=0)],
                         ids=["dpgmm-vmm", "pypggm-svmm-laplace"])
def test_stick_mixtures_pointwise_log_likelihood_is_the_programs(model_draw, make):
    X = model_draw[0][:400]
    est = make().fit(X)
    idata = est.to_arviz(X, num_draws=20)
    x = torch.as_tensor(X)
    for s in DRAWS_CHECKED:
        ours = torch.as_tensor(idata.log_likelihood["x"].values[0, s])
        program = stick_program_log_predictive(est, x, _posterior_draw(idata, s))
        torch.testing.assert_close(ours, program.to(ours.dtype), rtol=1e-5, atol=1e-4)
    loo = arviz().loo(est.to_arviz(X, num_draws=200))
    assert np.isfinite(loo.elpd_loo) and idata.sample_stats["elbo"].size == len(est.elbo_trace_)


@pytest.mark.filterwarnings("ignore:Estimated shape parameter of Pareto")  # a few influential rows of 300
def test_hdp_gd_pointwise_log_likelihood_is_the_programs_with_atoms_and_relevances_summed_out():
    data = hdp_gd_sample(n=300, seed=1, relevant=2, irrelevant=1)  # D = 3: 2^3 relevance patterns
    est = HDPGD(truncation=6, group_truncation=4, max_iter=100, random_state=0).fit(data.X, data.groups)
    idata = est.to_arviz(data.X, data.groups, num_draws=20)
    y = torch.as_tensor(data.X[:, :-1])
    x = geometric_transform(y, torch.as_tensor(data.X[:, -1]))
    # ln |dX / dY| by autograd, row by row (a triangular 3 x 3 Jacobian)
    log_jacobian = torch.stack([torch.autograd.functional.jacobian(geometric_transform, row[None])[0, :, 0].det().log()
                                for row in y])
    groups = torch.as_tensor(data.groups)
    for s in DRAWS_CHECKED:
        draw = _posterior_draw(idata, s)
        sites = {name: draw[name].double() for name in ("psi", "pi", "saliency", "alpha", "beta", "alpha_bg",
                                                       "beta_bg")}
        terms = []
        for t, phi in itertools.product(range(4), itertools.product((0.0, 1.0), repeat=3)):
            fixed = dict(sites, w=torch.nn.functional.one_hot(draw["w"], 6).double(),
                         z=torch.full_like(groups, t)[:, None], phi=torch.tensor(phi).expand(len(y), 3))
            trace = poutine.trace(poutine.condition(hdp_gd_model, data=fixed)).get_trace(
                x, groups, n_groups=4, truncation=6, group_truncation=4)
            trace.compute_log_prob()
            terms.append(sum(trace.nodes[name]["log_prob"].reshape(len(y), -1).sum(-1) for name in ("z", "phi", "x")))
        program = torch.logsumexp(torch.stack(terms), 0) + log_jacobian
        ours = torch.as_tensor(idata.log_likelihood["x"].values[0, s]).double()
        torch.testing.assert_close(ours, program, rtol=1e-4, atol=2e-3)
    assert np.isfinite(arviz().loo(est.to_arviz(data.X, data.groups, num_draws=200)).elpd_loo)


def test_to_arviz_refuses_a_draw_count_that_is_not_a_positive_integer(model_draw):
    est = DPGMM(truncation=5, random_state=0).fit(model_draw[0][:200])
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="num_draws"):
            est.to_arviz(model_draw[0][:200], num_draws=bad)


def _laplace_mixture(n=1500, d=2, k=4, seed=0):
    rng = np.random.default_rng(seed)
    centres, z = rng.normal(0, 10, (k, d)), rng.integers(0, k, n)
    return (centres[z] + rng.laplace(0, 1.0, (n, d))).astype(np.float32), z


@pytest.mark.filterwarnings("ignore:Estimated shape parameter of Pareto")
def test_compare_ranks_the_correctly_specified_likelihood_first_both_ways():
    laplace_data, z = _laplace_mixture()
    rng = np.random.default_rng(1)
    gaussian_data = (rng.normal(0, 10, (4, 2))[z] + rng.normal(0, 1.0, (1500, 2))).astype(np.float32)
    for X, truth in ((laplace_data, "laplace"), (gaussian_data, "gaussian")):
        fitted = {name: PYPGGM(likelihood=name, scale=1.0 if name == "gaussian" else 2**0.5, truncation=10,
                               max_iter=300, random_state=0).fit(X) for name in ("laplace", "gaussian")}
        table = bnpzoo.compare(fitted, X, labels=z)
        assert table.index[0] == truth, table
        assert {"clusters", "nmi", "acc"} <= set(table.columns) and table.loc[truth, "nmi"] > 0.9


@pytest.mark.filterwarnings("ignore:Estimated shape parameter of Pareto")
def test_compare_passes_groups_to_the_grouped_model_and_needs_two_fits():
    data = hdp_gd_sample(n=300, seed=2, relevant=2, irrelevant=1)
    fits = {f"K={k}": HDPGD(truncation=k, group_truncation=4, max_iter=60, random_state=0).fit(data.X, data.groups)
            for k in (6, 2)}
    table = bnpzoo.compare(fits, data.X, groups=data.groups, num_draws=100)
    assert np.isfinite(table["elpd_loo"]).all() and list(table["clusters"]) == sorted(table["clusters"], reverse=True)
    with pytest.raises(ValueError, match="at least two"):
        bnpzoo.compare({"one": fits["K=6"]}, data.X, groups=data.groups)
