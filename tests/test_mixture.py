"""The shared mixture core: PYPGGM contains DPGMM, a user's own program fits through MixtureSVI,
and learners refuse what a family cannot give them."""

import numpy as np
import pyro
import pyro.distributions as dist
import pytest

from bnpzoo import DPGMM, PYPGGM, MixtureSVI
from bnpzoo.metrics import nmi
from bnpzoo.inference.stick_mixture.session import GENERIC, LEARNERS
from conftest import student_t_model  # models/dp_gmm.py copied with a Student-t likelihood

SHARED = ["vmm", *LEARNERS]


@pytest.mark.cpu_state  # bit for bit across two code paths
@pytest.mark.parametrize("scale", [1.3, None])  # the fixed scale given; a learned covariance by the rule
@pytest.mark.parametrize("inference", SHARED)
def test_pypggm_at_d_0_rho_2_is_dpgmm(model_draw, inference, scale):
    X = model_draw[0][:600]
    common = dict(truncation=12, inference=inference, alpha=1.5, prior_precision=2.0, max_iter=60, random_state=3)
    dp = DPGMM(scale=scale, **common).fit(X)
    pyp = PYPGGM(discount=0.0, likelihood="gaussian", scale=scale, **common).fit(X)
    assert dp.covariance_type_ == pyp.covariance_type_ == ("fixed" if scale else "full")
    assert np.array_equal(dp.means_, pyp.means_) and np.array_equal(dp.weights_, pyp.weights_)
    assert np.array_equal(dp.covariances_, pyp.covariances_) and dp.elbo_trace_ == pyp.elbo_trace_


def test_a_learned_covariance_needs_the_gaussian():
    with pytest.raises(ValueError, match="likelihood='gaussian'"):
        PYPGGM(likelihood="laplace", covariance="full").fit(np.zeros((10, 2)))


def _student_t_data():
    rng = np.random.default_rng(0)
    centres, z = rng.normal(0, 8, (4, 2)), rng.integers(0, 4, 800)
    return (centres[z] + rng.standard_t(4, (800, 2))).astype(np.float32), z


@pytest.mark.parametrize("inference", GENERIC)
def test_a_copied_and_edited_program_fits_with_every_generic_learner(inference, random_state):
    X, z = _student_t_data()
    est = MixtureSVI(model=student_t_model, inference=inference, truncation=15, max_iter=300,
                     random_state=random_state).fit(X)
    # the four carry the data; the SVI learners have no move that closes a cluster of a few of the
    # t's outliers, which one start in ten leaves (svmm, random_state 5: a fifth of weight 0.008)
    assert np.sort(est.weights_)[::-1][:4].sum() > 0.98 and nmi(z, est.predict(X)) > 0.85
    assert np.isfinite(est.elbo_trace_).all() and np.isfinite(est.score(X))
    assert est.model_kwargs_["sigma"].shape == (2,)  # the data-driven scale was handed to the program


def test_mixture_svi_round_trips_with_the_program_given_again(tmp_path):
    X, _ = _student_t_data()
    est = MixtureSVI(model=student_t_model, truncation=10, max_iter=100, random_state=0).fit(X)
    est.save(tmp_path / "t.pt")
    with pytest.raises(ValueError, match="model="):
        MixtureSVI.load(tmp_path / "t.pt")
    back = MixtureSVI.load(tmp_path / "t.pt", model=student_t_model)
    assert np.array_equal(back.predict_proba(X), est.predict_proba(X))


def test_programs_that_break_the_contract_are_refused_with_the_reason():
    X, _ = _student_t_data()

    def with_extra_latent(data=None, *, truncation=20, sigma=1.0, subsample_size=None):
        pyro.sample("df", dist.Gamma(2.0, 0.5))
        return student_t_model(data, truncation=truncation, sigma=sigma, subsample_size=subsample_size)

    def without_mixture(data=None, *, truncation=20, subsample_size=None):
        with pyro.plate("data", data.shape[0]):
            pyro.sample("x", dist.Normal(0.0, 1.0).expand([data.shape[1]]).to_event(1), obs=data)

    with pytest.raises(ValueError, match="df"):
        MixtureSVI(model=with_extra_latent).fit(X)
    with pytest.raises(ValueError, match="missing"):
        MixtureSVI(model=without_mixture).fit(X)
    with pytest.raises(ValueError, match="callable"):
        MixtureSVI(model="dp_gmm").fit(X)
    with pytest.raises(ValueError, match="inference"):
        MixtureSVI(model=student_t_model, inference="vmm").fit(X)


@pytest.mark.parametrize("inference, closed_form", [("vmm", "batch"), ("natgrad-svi", "natural"),
                                                    ("sga-fisher", "Fisher")])
def test_a_learner_refuses_a_family_without_its_closed_form(model_draw, inference, closed_form):
    with pytest.raises(ValueError, match=f"{inference}.*{closed_form}.*laplace"):
        PYPGGM(likelihood="laplace", covariance="fixed", inference=inference).fit(model_draw[0])


@pytest.mark.parametrize("params, name", [({"discount": 1.0}, "discount"), ({"discount": -0.1}, "discount"),
                                          ({"alpha": -0.5, "discount": 0.2}, "alpha"), ({"rho": 0.5}, "rho"),
                                          ({"likelihood": "cauchy"}, "likelihood"), ({"scale": [1.0, -1.0]}, "scale"),
                                          ({"scale": [1.0, 2.0, 3.0]}, "scale"),
                                          ({"pruning_precision": -1.0}, "pruning_precision"),
                                          ({"split_moves": True}, "split_moves"),
                                          ({"split_moves": "yes"}, "split_moves")])
def test_bad_pypggm_arguments_are_named(model_draw, params, name):
    with pytest.raises(ValueError, match=name):
        PYPGGM(**params).fit(model_draw[0])


def test_a_scale_per_feature_is_used_as_given_and_saved(model_draw, tmp_path):
    X = model_draw[0]
    est = PYPGGM(scale=[0.5, 2.0], max_iter=50, random_state=0).fit(X)
    assert np.array_equal(est.scale_, [0.5, 2.0])
    est.save(tmp_path / "p.pt")
    back = PYPGGM.load(tmp_path / "p.pt")
    assert np.array_equal(back.predict(X), est.predict(X)) and back.get_params() == est.get_params()
