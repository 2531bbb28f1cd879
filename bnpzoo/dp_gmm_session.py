"""The SVI learners of ``DPGMM``: ``models.dp_gmm`` with a guide, a seed optimizer, and the hooks
that ``inference.svi.run_svi`` calls (per-sample Fisher, the evaluation bound, pruning).

A session keeps its own Pyro parameter store and optimizer state, so ``partial_fit`` can resume
it on the next batch while other estimators use Pyro in between.
"""

from dataclasses import dataclass

import pyro
import torch

from bnpzoo.guides import dp_gmm as guides
from bnpzoo.inference import optim as seed_optim
from bnpzoo.inference.conjugate import natural_estimate, responsibilities
from bnpzoo.inference.fisher import spherical_mixture_fisher
from bnpzoo.inference.sticks import reorder_and_prune, update_sticks
from bnpzoo.inference.svi import run_svi
from bnpzoo.inference.vmm import assign, assignment_scores, log_prior
from bnpzoo.models.dp_gmm import model as dp_gmm_model


@dataclass(frozen=True)
class Learner:
    guide: str  # "map", "natural", or "chosen" (the estimator's ``guide`` argument)
    learning_rate: float | None  # default step size (None: the rule has none)
    make_optim: callable  # (learning rate, per-parameter step unit, FisherBoard) -> PyroOptim


LEARNERS = {
    "vi": Learner("chosen", 0.05, lambda lr, unit, board: pyro.optim.Adam({"lr": lr})),
    "sga": Learner("map", 0.1, lambda lr, unit, board: seed_optim.sga(lr, lr_scale=unit)),
    "sga-momentum": Learner("map", 0.02, lambda lr, unit, board: seed_optim.sga_momentum(lr, lr_scale=unit)),
    "sga-fisher": Learner("map", 0.1, lambda lr, unit, board: seed_optim.sga_fisher(board, lr)),
    "svmm": Learner("map", 0.01, lambda lr, unit, board: seed_optim.svmm(lr, direction="fisher")),
    "svmm-mgrad": Learner("map", 0.1, lambda lr, unit, board: seed_optim.svmm(lr, direction="momentum",
                                                                              lr_scale=unit)),
    "svmm-grad": Learner("map", 0.1, lambda lr, unit, board: seed_optim.svmm(lr, direction="gradient",
                                                                             lr_scale=unit)),
    "natgrad-svi": Learner("natural", None, lambda lr, unit, board: seed_optim.natural_gradient_svi()),
}


class StochasticSession:
    """One fit of ``models.dp_gmm`` by a learner of ``LEARNERS``, resumable batch after batch."""

    def __init__(self, learner: str, init_means, init_counts, *, sigma, alpha, prior_mean, prior_precision,
                 guide="map", hard=False, learning_rate=None, prune_threshold=1e-3, eval_size=2000):
        spec = LEARNERS[learner]
        self.kind = guide if spec.guide == "chosen" else spec.guide
        self.hard = hard and self.kind != "natural"  # natural-gradient SVI uses responsibilities
        self.sigma, self.alpha, self.prune_threshold, self.eval_size = sigma, alpha, prune_threshold, eval_size
        self.prior = dict(prior_mean=prior_mean, prior_precision=prior_precision)
        self.n_clusters = init_means.shape[0]
        self.model_kwargs = dict(truncation=self.n_clusters, sigma=sigma, alpha=alpha, **self.prior)
        self.board = seed_optim.FisherBoard()
        lr = learning_rate if learning_rate is not None else spec.learning_rate
        # the step unit of the rules whose step scales with g (those whose factory uses it): g of a
        # cluster of weight pi_k is about pi_k (mean - mu_k) / sigma^2 for its mean and about pi_k
        # for its logit stick, so with eta in these units eta = 1 is a Newton step at pi_k = 1/K
        unit = {"mu_map": float(sigma**2) * self.n_clusters, "v_map": float(self.n_clusters)}
        self.optim = spec.make_optim(lr, unit, self.board)
        self.fisher = learner == "sga-fisher"
        init_sticks = update_sticks(init_counts, alpha)
        if self.kind == "map":
            self.guide = guides.map_guide(init_means, init_sticks)
        elif self.kind == "mean-field":
            self.guide = guides.mean_field_guide(init_means, init_sticks)
        else:
            self.guide = guides.natural_guide(init_means, init_counts, sigma=sigma, alpha=alpha, **self.prior)
        self.loss = self._natural_loss if self.kind == "natural" else ("map" if self.hard else "enum")
        self.store_state = None

    # -- the hooks of run_svi ----------------------------------------------------------------
    def _before_step(self, indices):
        if self.fisher or self.kind == "natural":  # the rules that need the minibatch itself
            self.batch = self.data[indices]
        if self.fisher:
            means, sticks, _ = guides.point_estimates("map")
            resp = assign(assignment_scores(self.batch, means, sticks, self.sigma), self.hard)
            f_mu, f_v = spherical_mixture_fisher(self.batch, resp, means, sticks, sigma=self.sigma, alpha=self.alpha,
                                                 n_total=self.data.shape[0], **self.prior)
            # plus the prior's share of the curvature, which squared gradients cannot see (they
            # square its share of the gradient, O(1/N^2)): -d2/dmu2 of ln p(mu) / N = lambda0 / (N sigma^2),
            # and -d2/du2 of ln Beta(v | 1, a0) / N = (a0 - 1) v (1 - v) / N for u = logit v
            n = self.data.shape[0]
            f_mu = f_mu + self.prior["prior_precision"] / (n * self.sigma**2)
            f_v = f_v + ((self.alpha - 1) * sticks * (1 - sticks) / n).clamp_min(0)
            self.board.update(mu_map=f_mu, v_map=f_v)

    def _natural_loss(self, model, guide, *args, **kwargs):
        """1/2 |theta - theta_hat|^2 over the natural parameters; see ``inference.optim``."""
        q = {key: pyro.param(name) for key, name in guides.NATURAL.items()}
        with torch.no_grad():
            resp = responsibilities(self.batch, q["precision"], q["weighted"], q["c1"], q["c0"], self.sigma)
            target = natural_estimate(self.batch, resp, n_total=self.data.shape[0], sigma=self.sigma,
                                      alpha=self.alpha, **self.prior)
        return sum(0.5 * ((q[key] - target[key]) ** 2).sum() for key in q)

    def _evaluate(self):
        """The bound at the point estimates on the fixed evaluation minibatch, scaled to N:
        (N / M) sum_n ln sum_k pi_k N(x_n | mu_k) + ln p(mu) + ln p(v) (seed 004 eq. (22)-(23)
        with z summed out; the same number for every learner, so their traces compare)."""
        means, sticks, _ = guides.point_estimates(self.kind)
        scores = assignment_scores(self.eval_batch, means, sticks, self.sigma)
        # owners under the MAP assignment (eq. (15)): a cluster that owns no evaluation sample is
        # dead (soft counts never reach zero, and trailing clusters' sticks stay near 1 / j)
        self.eval_counts = torch.bincount(scores.argmax(1), minlength=scores.shape[1]).to(scores.dtype)
        data_term = torch.logsumexp(scores, 1).sum() * (self.data.shape[0] / self.eval_batch.shape[0])
        return data_term + log_prior(means, sticks, sigma=self.sigma, alpha=self.alpha, n_clusters=self.n_clusters,
                                     **self.prior)

    def _reorganise(self):
        """Seed 004 V.D: clusters reordered by their evaluation counts, empty ones and those whose
        stick falls below the threshold dropped (as ``inference.vmm`` does)."""
        keep = reorder_and_prune(self.eval_counts, self.alpha, self.prune_threshold)
        if keep.numel() < 2:  # the model's stick plate needs K >= 2
            keep = torch.argsort(self.eval_counts, descending=True)[:2]
        if keep.numel() == self.eval_counts.numel() and bool((keep[1:] > keep[:-1]).all()):
            return  # nothing moves
        for old, new, rows in guides.select_clusters(self.kind, keep, sigma=self.sigma, alpha=self.alpha,
                                                     prior_precision=self.prior["prior_precision"]):
            seed_optim.carry_state(self.optim, old, new, rows)
        self.model_kwargs["truncation"] = keep.numel()

    # -- running -----------------------------------------------------------------------------
    def run(self, x, *, max_iter, batch_size, tol, clock_start=None, verbose=False, window=10):
        """Steps on ``x`` (the data set, or the current batch of a stream); the bound's times count
        from ``clock_start`` (``time.perf_counter()``; default: now)."""
        store = pyro.get_param_store()
        if self.store_state is None:
            store.clear()
            pyro.poutine.block(self.guide)(x, **self.model_kwargs)  # create the parameters
        else:
            store.set_state(self.store_state)
        self.data = x
        picks = torch.randperm(x.shape[0], device=x.device)[: self.eval_size]
        self.eval_batch = x[picks]
        reorganise = self._reorganise if self.kind in ("map", "natural") else None
        run = run_svi(dp_gmm_model, self.guide, x, model_kwargs=self.model_kwargs, optim=self.optim, loss=self.loss,
                      max_iter=max_iter, batch_size=batch_size, tol=tol, window=window, evaluate=self._evaluate,
                      before_step=self._before_step, reorganise=reorganise, clock_start=clock_start,
                      verbose=verbose)
        self.estimates = guides.point_estimates(self.kind)
        self.store_state = store.get_state()
        return run

