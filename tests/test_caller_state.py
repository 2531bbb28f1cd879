"""A fit leaves the caller's process as it found it (``bnpzoo.caller_state``): the caller's Pyro
param, and the next draws of torch's, numpy's and Python's generators, as in a process that did not
fit; fits inside ``torch.no_grad()``, ``torch.inference_mode()`` and the caller's Pyro handlers."""

import random

import numpy as np
import pyro
import pytest
import torch

from bnpzoo import DPBMM, DPGMM, HDPGD, PYPGGM, CoupledDP, MixtureSVI
from bnpzoo.data import blobs, hdp_gd_sample
from bnpzoo.mixture import INFERENCE
from bnpzoo.models.dp_gmm import model as dp_gmm_model

X = blobs(n=300, d=2, k=3, seed=4).X
GROUPED = hdp_gd_sample(n=200, seed=1, relevant=2, irrelevant=1)


def _fits():
    """Every estimator with every learner, small and short."""
    for learner in INFERENCE:
        yield f"dp-gmm {learner}", lambda learner=learner: DPGMM(inference=learner, max_iter=20, random_state=0).fit(X)
    yield "dp-gmm partial_fit", lambda: DPGMM(inference="svmm", max_iter=20, random_state=0).partial_fit(X)
    yield "pyp-ggm svmm", lambda: PYPGGM(inference="svmm", max_iter=20, random_state=0).fit(X)
    yield "dp-bmm vmm", lambda: DPBMM(max_iter=20, random_state=0).fit((X > 0).astype(np.float32))
    yield "mixture-svi", lambda: MixtureSVI(model=dp_gmm_model, max_iter=20, random_state=0).fit(X)
    for learner in ("vi", "online-vi"):
        yield f"hdp-gd {learner}", lambda learner=learner: HDPGD(inference=learner, max_iter=5, random_state=0).fit(
            GROUPED.X, GROUPED.groups)
    yield "coupled-dp", lambda: CoupledDP(truncation=3, max_iter=4, warmup=2, random_state=0).fit(
        X[:60], np.arange(60) % 3)


def _draws():
    return torch.rand(3), np.random.rand(3), [random.random() for _ in range(3)]


def _seed():
    torch.manual_seed(11), np.random.seed(12), random.seed(13)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name, fit", list(_fits()), ids=[name for name, _ in _fits()])
def test_a_fit_leaves_the_callers_param_and_generators_as_they_were(name, fit):
    pyro.clear_param_store()
    mine = pyro.param("my_w", torch.ones(2))
    _seed()
    expected = _draws()
    _seed()
    fit()
    assert pyro.get_param_store().keys() == {"my_w"} and pyro.param("my_w") is mine
    for after, before in zip(_draws(), expected):
        assert np.array_equal(np.asarray(after), np.asarray(before)), name


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name, fit", list(_fits()), ids=[name for name, _ in _fits()])
def test_a_fit_inside_the_callers_trace_adds_no_site_to_it(name, fit):
    """The learners' own sample and param sites (the SVI learners' "sticks", "q_v_c0", ...) neither
    collide with each other in the caller's trace nor land in it; the caller's own sites do."""
    with pyro.poutine.trace() as caller:
        pyro.sample("mine", pyro.distributions.Normal(0.0, 1.0))
        fit()
    assert list(caller.trace.nodes) == ["mine"], name


def test_fits_without_a_seed_follow_the_callers_generator_and_advance_it(same):
    """The same caller's state gives the same fit and leaves the generator at the same, advanced
    state. (Two fits from different states need not differ: the conjugate path reaches one optimum
    from any start on these blobs, to float32 rounding.)"""
    torch.manual_seed(0)
    first = DPGMM(inference="svmm", max_iter=20).fit(X).means_
    advanced = torch.get_rng_state()
    torch.manual_seed(0)
    assert same(DPGMM(inference="svmm", max_iter=20).fit(X).means_, first)
    assert torch.equal(torch.get_rng_state(), advanced)
    torch.manual_seed(0)
    assert not torch.equal(torch.get_rng_state(), advanced)


@pytest.mark.parametrize("context", [torch.no_grad, torch.inference_mode])
@pytest.mark.parametrize("learner", ["vi", "svmm", "vmm"])
def test_fits_run_inside_no_grad_and_inference_mode(context, learner):
    with context():
        x = torch.as_tensor(X)
        est = DPGMM(inference=learner, max_iter=30, random_state=0).fit(x)
        assert torch.is_grad_enabled() is False
    assert est.n_clusters_ >= 1 and np.isfinite(est.score(X))
