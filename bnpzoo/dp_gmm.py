"""``bnpzoo.DPGMM``: the DP mixture of spherical Gaussians (seed 002) behind a scikit-learn face.

The one place that pairs ``models.dp_gmm`` with ``guides.dp_gmm`` and a learner.
"""

import time

import pyro
import torch

from bnpzoo._validation import Interval, OneOf, check_array
from bnpzoo.base import MixtureEstimator
from bnpzoo.guides import dp_gmm as guides
from bnpzoo.inference.kmeans import kmeans
from bnpzoo.inference.sticks import sort_by_size
from bnpzoo.inference.svi import run_svi
from bnpzoo.inference.vmm import assignment_scores, fit_vmm
from bnpzoo.models.dp_gmm import model as dp_gmm_model
from bnpzoo.ops import default_sigma, spherical_normal_log_density, stick_breaking_log_weights, tail_sums, weights_to_sticks

INFERENCE = ("vmm", "vi")


class DPGMM(MixtureEstimator):
    """Dirichlet-process mixture of spherical Gaussians with a shared, fixed variance sigma^2.

    Parameters (keyword-only)
    ----------
    truncation : int, K, the most clusters the fit can use.
    inference : "vmm" (batch closed-form MM, seed 002 eq. (5), (15)) or "vi" (Pyro SVI,
        ``TraceEnum_ELBO`` with assignments summed out, Adam).
    alpha : a0 of the Beta(1, a0) sticks.
    sigma : the component standard deviation; None takes ``bnpzoo.ops.default_sigma``, computed
        from the data and the K-means start, which keeps the likelihood from drowning the
        stick-breaking prior without merging well-separated clusters.
    prior_precision : lambda0; each mean has prior N(mean of X, sigma^2 / lambda0). It acts as
        lambda0 pseudo-samples at the data mean, so a cluster needs about that many members
        before its mean leaves the centre: the default 20 prunes K-means' over-segmentation.
        The price is shrinkage: a cluster of N_k samples has its mean pulled a fraction
        lambda0 / (N_k + lambda0) of the way to the data mean, which costs likelihood when
        clusters hold only a few dozen samples; lower it there.
    assignment : "hard" (MAP assignments, as in the seed) or "soft" (responsibilities); vmm only.
    guide : "map" (Delta sites) or "mean-field" (Normal means, Beta sticks); vi only.
    max_iter, tol : iteration cap and relative change of the bound that counts as converged.
    prune_threshold : clusters whose stick falls below it are dropped (seed 004 V.D).
    batch_size : minibatch size for vi (None: full batch).
    learning_rate : Adam's step for vi.
    n_init : K-means restarts for the initialisation (seed 002 Algorithm 1, 3.iv).
    device, dtype : where and in which precision to fit (default: the data's device, float32).
    random_state : seed for the initialisation and SVI.
    verbose : progress bar.

    Fitted attributes: ``means_`` (K' x D), ``sticks_`` (K' - 1), ``weights_`` (K'),
    ``n_clusters_`` (K'), ``sigma_``, ``elbo_trace_`` (the learner's objective per iteration),
    ``converged_``, ``n_iter_``, ``counts_`` (expected training samples per cluster),
    ``n_features_in_``, ``fit_seconds_``.
    """

    _parameter_constraints = {
        "truncation": Interval(int, 1),
        "inference": OneOf(*INFERENCE),
        "alpha": Interval(float, 0, low_open=True),
        "sigma": Interval(float, 0, low_open=True, optional=True),
        "prior_precision": Interval(float, 0, low_open=True),
        "assignment": OneOf("hard", "soft"),
        "guide": OneOf("map", "mean-field"),
        "max_iter": Interval(int, 1),
        "tol": Interval(float, 0),
        "prune_threshold": Interval(float, 0, 1, high_open=True),
        "batch_size": Interval(int, 1, optional=True),
        "learning_rate": Interval(float, 0, low_open=True),
        "n_init": Interval(int, 1),
        "dtype": OneOf("float32", "float64"),
        "random_state": Interval(int, 0, optional=True),
        "verbose": OneOf(True, False),
    }
    _fitted_attributes = ("means_", "sticks_", "weights_", "n_clusters_", "sigma_", "elbo_trace_",
                          "converged_", "n_iter_", "counts_", "n_features_in_", "fit_seconds_",
                          "mean_scale_", "stick_concentration_")

    def __init__(self, *, truncation=50, inference="vmm", alpha=1.0, sigma=None, prior_precision=20.0,
                 assignment="hard", guide="map", max_iter=500, tol=1e-5, prune_threshold=1e-3,
                 batch_size=None, learning_rate=0.05, n_init=3, device=None, dtype="float32",
                 random_state=None, verbose=False):
        self.truncation = truncation
        self.inference = inference
        self.alpha = alpha
        self.sigma = sigma
        self.prior_precision = prior_precision
        self.assignment = assignment
        self.guide = guide
        self.max_iter = max_iter
        self.tol = tol
        self.prune_threshold = prune_threshold
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.n_init = n_init
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    # -- fitting -----------------------------------------------------------------------------
    def fit(self, X, y=None):
        """Fit on X (N x D); returns self."""
        self._validate_params()
        x = check_array(X, dtype=self._dtype, device=self._device_for(X))
        start = time.perf_counter()
        seed = self.random_state
        if seed is not None:
            pyro.set_rng_seed(seed)
        init_means, labels = kmeans(x, self.truncation, n_init=self.n_init, seed=seed)
        if self.sigma is None:
            sigma = default_sigma(x, init_means, labels)
        else:
            sigma = torch.tensor(float(self.sigma), dtype=x.dtype, device=x.device)
        prior_mean = x.mean(0)
        hyper = dict(alpha=self.alpha, prior_mean=prior_mean, prior_precision=self.prior_precision)
        if self.inference == "vmm":
            fit = fit_vmm(x, init_means, labels, sigma=sigma, hard=self.assignment == "hard", max_iter=self.max_iter,
                          tol=self.tol, prune_threshold=self.prune_threshold, verbose=self.verbose, **hyper)
            means, sticks, trace, n_iter, converged = fit.means, fit.sticks, fit.objective_trace, fit.n_iter, fit.converged
            scale = None
        else:
            means, sticks, trace, n_iter, converged, scale = self._fit_vi(x, init_means, labels, sigma, hyper)
        self.sigma_ = sigma
        self.n_features_in_ = x.shape[1]
        self._finalise(x, means, sticks, scale)
        self.elbo_trace_, self.n_iter_, self.converged_ = [float(v) for v in trace], n_iter, bool(converged)
        self.fit_seconds_ = time.perf_counter() - start
        return self

    def _fit_vi(self, x, init_means, labels, sigma, hyper):
        k = init_means.shape[0]
        order, sticks = sort_by_size(torch.bincount(labels, minlength=k).to(x.dtype), self.alpha)
        init_means, init_sticks = init_means[order], sticks[:-1]
        make_guide = guides.map_guide if self.guide == "map" else guides.mean_field_guide
        pyro.clear_param_store()
        run = run_svi(dp_gmm_model, make_guide(init_means, init_sticks), x,
                      model_kwargs=dict(truncation=k, sigma=sigma, **hyper),
                      optim=pyro.optim.Adam({"lr": self.learning_rate}), max_iter=self.max_iter,
                      batch_size=self.batch_size, tol=self.tol, verbose=self.verbose)
        means, sticks, scale = guides.point_estimates(self.guide)
        return means, sticks, run.elbo_trace, run.n_iter, run.converged, scale

    def _finalise(self, x, means, sticks, scale):
        """Order clusters by weight and keep those that own a training sample (seed 004 V.D)."""
        log_w = stick_breaking_log_weights(sticks)
        table = assignment_scores(x, means, sticks, self.sigma_)
        owners = torch.bincount(table.argmax(1), minlength=means.shape[0])
        order = torch.argsort(log_w, descending=True)
        keep = order[owners[order] > 0]
        weights = log_w[keep].exp()
        self.means_, self.weights_, self.n_clusters_ = means[keep], weights / weights.sum(), int(keep.numel())
        self.sticks_ = weights_to_sticks(self.weights_)
        # renormalising the kept weights shifts every column alike: the softmax is unchanged
        self.counts_ = torch.softmax(table[:, keep], 1).sum(0)
        # posterior factors for ArviZ: the conjugate factors given the responsibilities,
        # q(mu_k) = N(mean_k, sigma^2 / (N_k + lambda0)) (the mean-field guide's own scales where
        # it has them) and q(v_k) = Beta(1 + N_k, a0 + N_{>k}).
        conjugate = (self.sigma_ / (self.counts_ + self.prior_precision).sqrt())[:, None]
        self.mean_scale_ = scale[keep] if scale is not None else conjugate.expand_as(self.means_).clone()
        tails = tail_sums(self.counts_)
        self.stick_concentration_ = torch.stack([1 + self.counts_[:-1], self.alpha + tails[:-1]])

    # -- the fitted model ----------------------------------------------------------------------
    def _log_joint_table(self, x):
        return self.weights_.log() + spherical_normal_log_density(x, self.means_, self.sigma_)

    def _posterior_draws(self, num_draws, rng):
        as_tensor = lambda a: torch.as_tensor(a, dtype=self.means_.dtype, device=self.means_.device)
        noise = as_tensor(rng.standard_normal((num_draws,) + tuple(self.means_.shape)))
        c1, c0 = self.stick_concentration_.cpu().double().numpy()
        sticks = as_tensor(rng.beta(c1, c0, size=(num_draws, c1.size)))
        return {"mu": self.means_ + self.mean_scale_ * noise, "weights": stick_breaking_log_weights(sticks).exp()}

    def _draw_log_likelihood(self, x, draw):
        return torch.logsumexp(draw["weights"].log() + spherical_normal_log_density(x, draw["mu"], self.sigma_), 1)

