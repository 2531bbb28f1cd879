"""``bnpzoo.DPGMM``: the DP mixture of spherical Gaussians (seed 002) behind a scikit-learn face.

The one place that pairs ``models.dp_gmm`` with ``guides.dp_gmm`` and a learner.
"""

import time

import pyro
import torch

from bnpzoo._validation import Interval, OneOf, check_array
from bnpzoo.base import MixtureEstimator
from bnpzoo.dp_gmm_session import LEARNERS, StochasticSession
from bnpzoo.inference.kmeans import kmeans
from bnpzoo.inference.sticks import sort_by_size
from bnpzoo.inference.vmm import assignment_scores, fit_vmm
from bnpzoo.ops import default_sigma, spherical_normal_log_density, stick_breaking_log_weights, tail_sums, weights_to_sticks

INFERENCE = ("vmm", *LEARNERS)
STOCHASTIC = tuple(name for name in LEARNERS if name != "vi")


class DPGMM(MixtureEstimator):
    """Dirichlet-process mixture of spherical Gaussians with a shared, fixed variance sigma^2.

    Parameters (keyword-only)
    ----------
    truncation : int, K, the most clusters the fit can use.
    inference : "vmm" (batch closed-form MM, seed 002 eq. (5), (15)); "vi" (Pyro SVI with Adam);
        or a seed learner on minibatches under Pyro SVI (``inference.optim``): "sga", "sga-momentum",
        "sga-fisher" (seed 002 eq. (6)-(9), (16)), "svmm", "svmm-mgrad", "svmm-grad" (seed 004
        eq. (11), (13), (14) and its ablations), "natgrad-svi" (conjugate SVI, seed 004 Table I).
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
    assignment : "hard" (MAP assignments, seed 002 eq. (15)) or "soft" (responsibilities; under SVI
        the assignments are summed out by enumeration). None: the seeds' choice, hard for vmm and
        the seed learners, soft for vi and natgrad-svi. sga-fisher needs hard assignments.
    guide : "map" (Delta sites) or "mean-field" (Normal means, Beta sticks); vi only (the seed
        learners use the MAP guide, natgrad-svi the conjugate mean-field guide).
    max_iter, tol : iteration (SVI: step) cap and relative change of the bound that counts as
        converged (SVI: between two evaluations, 10 steps apart).
    prune_threshold : clusters whose stick falls below it are dropped (seed 004 V.D).
    batch_size : minibatch size of the SVI learners (None: full batch for vi, min(N, 1000) for
        the seed learners).
    learning_rate : the step eta of the SVI learner (None: its default, ``dp_gmm_session.LEARNERS``:
        Adam 0.05 for vi, 0.1 for sga-fisher as in seed 002, 0.01 for svmm). For sga, sga-momentum,
        svmm-mgrad and svmm-grad, whose steps scale with the gradient, eta is in units of
        sigma^2 K for the means and K for the logit sticks (K the initial truncation): g of a
        cluster of weight pi_k is about pi_k (mean_k - mu_k) / sigma^2, so eta = 1 is a Newton
        step for a cluster of weight 1 / K. svmm-grad is then the same rule as sga (seed 004's
        case 1 is seed 002's constant-step ascent); they differ only in name.
    n_init : K-means restarts for the initialisation (seed 002 Algorithm 1, 3.iv). The seed
        learners run K-means on a random subset of min(N, max(20 K, batch size)) samples.
    device, dtype : where and in which precision to fit (default: the data's device, float32).
    random_state : seed for the initialisation and SVI.
    verbose : progress bar.

    Fitted attributes: ``means_`` (K' x D), ``sticks_`` (K' - 1), ``weights_`` (K'),
    ``n_clusters_`` (K'), ``sigma_``, ``elbo_trace_`` (the learner's objective per iteration),
    ``converged_``, ``n_iter_``, ``counts_`` (expected training samples per cluster),
    ``n_features_in_``, ``fit_seconds_``; for the SVI learners also ``elbo_seconds_`` (wall time
    since the start of the fit call, initialisation included, of each bound in ``elbo_trace_``,
    evaluated every 10 steps on a fixed minibatch).

    ``partial_fit(X)`` (seed learners): one pass of minibatch steps over X, resuming the previous
    call's parameters and optimizer state; each batch stands in for the data set (N = len(X)).
    """

    _parameter_constraints = {
        "truncation": Interval(int, 1),
        "inference": OneOf(*INFERENCE),
        "alpha": Interval(float, 0, low_open=True),
        "sigma": Interval(float, 0, low_open=True, optional=True),
        "prior_precision": Interval(float, 0, low_open=True),
        "assignment": OneOf("hard", "soft", None),
        "guide": OneOf("map", "mean-field"),
        "max_iter": Interval(int, 1),
        "tol": Interval(float, 0),
        "prune_threshold": Interval(float, 0, 1, high_open=True),
        "batch_size": Interval(int, 1, optional=True),
        "learning_rate": Interval(float, 0, low_open=True, optional=True),
        "n_init": Interval(int, 1),
        "dtype": OneOf("float32", "float64"),
        "random_state": Interval(int, 0, optional=True),
        "verbose": OneOf(True, False),
    }
    _fitted_attributes = ("means_", "sticks_", "weights_", "n_clusters_", "sigma_", "elbo_trace_",
                          "converged_", "n_iter_", "counts_", "n_features_in_", "fit_seconds_",
                          "mean_scale_", "stick_concentration_", "elbo_seconds_")

    def __init__(self, *, truncation=50, inference="vmm", alpha=1.0, sigma=None, prior_precision=20.0,
                 assignment=None, guide="map", max_iter=500, tol=1e-5, prune_threshold=1e-3,
                 batch_size=None, learning_rate=None, n_init=3, device=None, dtype="float32",
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
        if self.random_state is not None:
            pyro.set_rng_seed(self.random_state)
        if self.inference == "vmm":
            init_means, labels, self.sigma_, hyper = self._start(x, x)
            fit = fit_vmm(x, init_means, labels, sigma=self.sigma_, hard=self._hard_assignments(),
                          max_iter=self.max_iter, tol=self.tol, prune_threshold=self.prune_threshold,
                          verbose=self.verbose, **hyper)
            means, sticks, scale, trace, seconds = fit.means, fit.sticks, None, fit.objective_trace, []
            n_iter, converged = fit.n_iter, fit.converged
        else:
            self._session = None
            run = self._run_session(x, self.max_iter, start)
            (means, sticks, scale), trace, seconds = self._session.estimates, run.elbo_trace, run.seconds
            n_iter, converged = run.n_iter, run.converged
        self._record(x, means, sticks, scale, trace, seconds, n_iter, converged, start)
        return self

    def partial_fit(self, X, y=None):
        """One pass of minibatch steps over the batch X, resuming the last call; returns self."""
        self._validate_params()
        if self.inference not in STOCHASTIC:
            raise ValueError(f"partial_fit needs a stochastic learner ({', '.join(STOCHASTIC)}), "
                             f"not inference={self.inference!r}")
        x = check_array(X, dtype=self._dtype, device=self._device_for(X),
                        n_features=getattr(self, "n_features_in_", None))
        start = time.perf_counter()
        if getattr(self, "_session", None) is None and self.random_state is not None:
            pyro.set_rng_seed(self.random_state)
        batch = self._batch_size(x.shape[0])
        run = self._run_session(x, -(-x.shape[0] // batch), start)
        means, sticks, scale = self._session.estimates
        previous = getattr(self, "elbo_trace_", [])
        self._record(x, means, sticks, scale, previous + run.elbo_trace,
                     getattr(self, "elbo_seconds_", []) + run.seconds, getattr(self, "n_iter_", 0) + run.n_iter,
                     run.converged, start)
        return self

    def _start(self, x, sample):
        """K-means on ``sample`` (seed 002 Algorithm 1, 3.iv), sigma and the prior's settings."""
        init_means, labels = kmeans(sample, min(self.truncation, sample.shape[0]), n_init=self.n_init,
                                    seed=self.random_state)
        if self.sigma is None:
            sigma = default_sigma(sample, init_means, labels)
        else:
            sigma = torch.tensor(float(self.sigma), dtype=x.dtype, device=x.device)
        hyper = dict(alpha=self.alpha, prior_mean=x.mean(0), prior_precision=self.prior_precision)
        return init_means, labels, sigma, hyper

    def _hard_assignments(self) -> bool:
        """The seeds' MAP assignments (seed 002 eq. (15), seed 004 eq. (20)) unless asked otherwise;
        vi and natgrad-svi sum them out."""
        if self.assignment is None:
            return self.inference not in ("vi", "natgrad-svi")
        if self.inference == "sga-fisher" and self.assignment == "soft":
            # F collects r_nk^2 while g collects r_nk: diffuse clusters get steps of order 1 / r_nk
            raise ValueError("assignment='soft' does not suit sga-fisher: its per-sample Fisher needs "
                             "one-hot assignments (seed 002 eq. (15)); use assignment='hard' or None")
        return self.assignment == "hard"

    def _batch_size(self, n):
        if self.batch_size is not None:
            return min(self.batch_size, n)
        return n if self.inference == "vi" else min(n, 1000)

    def _run_session(self, x, max_iter, clock_start):
        batch = self._batch_size(x.shape[0])
        if getattr(self, "_session", None) is None:
            if min(self.truncation, x.shape[0]) < 2:  # the model's stick plate has K - 1 entries
                raise ValueError(f"the SVI learners need truncation >= 2 and at least 2 samples to start, got "
                                 f"truncation={self.truncation} and {x.shape[0]} samples")
            if self.inference == "vi":
                sample = x
            else:
                size = min(x.shape[0], max(20 * self.truncation, batch))
                sample = x[torch.randperm(x.shape[0], device=x.device)[:size]]
            init_means, labels, sigma, hyper = self._start(x, sample)
            counts = torch.bincount(labels, minlength=init_means.shape[0]).to(x.dtype) * (x.shape[0] / sample.shape[0])
            order, _ = sort_by_size(counts, self.alpha)
            self._session = StochasticSession(self.inference, init_means[order], counts[order], sigma=sigma,
                                              guide=self.guide, hard=self._hard_assignments(),
                                              learning_rate=self.learning_rate,
                                              prune_threshold=self.prune_threshold, **hyper)
            self.sigma_ = sigma
        return self._session.run(x, max_iter=max_iter, batch_size=batch, tol=self.tol, clock_start=clock_start,
                                 verbose=self.verbose)

    def _record(self, x, means, sticks, scale, trace, seconds, n_iter, converged, start):
        self.n_features_in_ = x.shape[1]
        self._finalise(x, means, sticks, scale)
        self.elbo_trace_, self.elbo_seconds_ = [float(v) for v in trace], [float(v) for v in seconds]
        self.n_iter_, self.converged_ = n_iter, bool(converged)
        self.fit_seconds_ = time.perf_counter() - start

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
    def _logits(self, x, out=None):
        """ln pi_k - |mu_k|^2 / (2 sigma^2) + x_n . mu_k / sigma^2: the log joint less the row
        constant -|x_n|^2 / (2 sigma^2) + ln-normaliser, one matrix product and one add."""
        var = self.sigma_**2
        bias = self.weights_.log() - (self.means_ * self.means_).sum(1) / (2 * var)
        return torch.mm(x, self.means_.T / var, out=out).add_(bias)

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

