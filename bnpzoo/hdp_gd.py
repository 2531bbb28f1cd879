"""``HDPGD``: the HDP mixture of generalized Dirichlet distributions with feature selection
([HDP-GD]), fitted by batch VI (Algorithm 1) or online VI (memoized passes for a fit, Algorithm 2's
steps for a stream); the program is
``models/hdp_gd.py``, the updates ``inference/hdp_gd/updates.py``.

Input. Each row is a proportion vector Y: D positive parts whose sum stays below 1 (the rest,
1 - sum Y, is an implicit last part), in groups given by ``groups``. Rows that all sum to 1 are
read as compositions whose last column is that rest (D = columns - 1): give the rest this way
when it is tiny, since 1 - sum Y cannot recover it in floating point. Non-negative histograms or
counts are accepted with ``input="histograms"``, normalised per row with a floor so that no part
is 0 and the sum stays below 1:

    Y_l = (h_l + c) / (sum_f h_f + (D + 1) c),   c = floor * sum_f h_f / D   (c = floor if the row is 0)

that is, every bin and the implicit last part receive ``floor`` times the row's mean bin
(``bnpzoo.ops.normalise_histograms``). The fit runs on the geometric transform of eq. (11)
(``bnpzoo.ops.geometric_transform``), its remaining masses summed from the tail.
"""

import time
from dataclasses import dataclass

import numpy as np
import torch

from bnpzoo._validation import SEED, Interval, OneOf
from bnpzoo.base import Estimator, offered_if, warn_if_unconverged
from bnpzoo.caller_state import keeps_caller_state
from bnpzoo.corpus import fitted_positions, group_labels
from bnpzoo.inference.conjugate import expected_log_weights
from bnpzoo.inference.hdp_gd.learner import Schedule, fit_batch, fit_memoized, online_pass
from bnpzoo.inference.hdp_gd.svi import fit_svi
from bnpzoo.inference.svi import Schedule as SVISchedule, memo_batch_size
from bnpzoo.inference.hdp_gd.updates import Globals, Observations, Prior, local_bound, local_step, saliency_mean, tables
from bnpzoo.models.hdp_gd import model as shipped_program
from bnpzoo.ops import (geometric_transform, get_rng_state, log_remaining_mass, normalise_histograms, row_blocks,
                        set_rng_state, stick_breaking_log_weights)
from bnpzoo.threads import fit_threads

SVI_STEPS, SVI_LEARNING_RATE = 300, 0.005  # svi's default steps and Adam's step (benchmarks/reports/hdp_gd.md)
VI_ITERATIONS = 1500  # vi's default iterations (passes for online-vi), and those of svi's start


@dataclass(frozen=True)
class HDPLearner:
    """One HDP-GD learner (``LEARNERS``): its default iterations, whether it streams
    (``partial_fit``), whether it fits a user's program, and ``fit(estimator, obs, prior, seed)``
    -> (global factors, bound trace, the rows' local factors or None), which sets the estimator's
    ``n_iter_``, ``n_passes_`` and ``converged_``."""

    name: str
    fit: callable
    default_iterations: int = VI_ITERATIONS
    streams: bool = False
    takes_program: bool = False
    minibatches: bool = True  # a step on a minibatch (else every row)


def _fit_vi(estimator, obs, prior, seed):
    """Batch vi, Algorithm 1."""
    g, f, trace, estimator.n_iter_, estimator.converged_ = fit_batch(
        obs, prior, estimator._schedule(obs.x.shape[0]), max_iter=estimator.max_iter or VI_ITERATIONS, seed=seed)
    estimator.n_passes_ = estimator.n_iter_
    return g, trace, f


def _fit_memoized(estimator, obs, prior, seed):
    """online-vi's fit: memoized VI over the rows' batches."""
    schedule = estimator._schedule(obs.x.shape[0])
    g, trace, estimator.n_passes_, estimator.converged_ = fit_memoized(
        obs, prior, schedule, seed=seed, max_passes=estimator.max_iter or VI_ITERATIONS)
    estimator.n_iter_ = estimator.n_passes_ * -(-obs.x.shape[0] // schedule.batch_size)  # minibatch steps
    return g, trace, None


def _fit_program(estimator, obs, prior, seed):
    """Pyro's SVI on the program, started from batch vi's fit of the shipped program: from the
    K-means start alone SVI neither merges nor prunes, and kept nearly every atom
    (``benchmarks/reports/hdp_gd.md``)."""
    start = fit_batch(obs, prior, estimator._schedule(obs.x.shape[0]), max_iter=VI_ITERATIONS, seed=seed)[0]
    kwargs = dict(n_groups=len(estimator.groups_), truncation=estimator.truncation,
                  group_truncation=estimator.group_truncation, gamma=prior.gamma, lam=prior.lam, xi=prior.xi,
                  parameter_prior=(prior.shape, prior.rate))
    steps = SVISchedule(estimator.max_iter or SVI_STEPS, estimator.batch_size, estimator.tol)
    g, run = fit_svi(estimator.model or shipped_program, obs.x, obs.groups, start, model_kwargs=kwargs, schedule=steps,
                     learning_rate=estimator.learning_rate or SVI_LEARNING_RATE, verbose=estimator.verbose)
    estimator.n_iter_, estimator.n_passes_, estimator.converged_ = run.n_iter, run.n_iter, run.converged
    return g, run.elbo_trace, None


LEARNERS = {learner.name: learner for learner in (
    HDPLearner("vi", _fit_vi, minibatches=False),
    HDPLearner("online-vi", _fit_memoized, streams=True),
    HDPLearner("svi", _fit_program, default_iterations=SVI_STEPS, takes_program=True),
)}
INFERENCE = tuple(LEARNERS)
LOCAL_ITERS = 5  # rounds of q(Z), q(phi) for data the fit has not seen


def _unsort(values: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """Rows in group order back to the order of X."""
    out = torch.empty_like(values)
    out[order] = values
    return out


def _compositions(wide: torch.Tensor) -> torch.Tensor:
    """Rows as compositions with an explicit last part: proportions (sum < 1) gain 1 - sum; rows
    that all sum to 1 already are taken as they are (their last part is the remainder)."""
    sums = wide.sum(1)
    outside = (wide <= 0).any(1)
    whole = (sums - 1).abs() <= 1e-6
    if not outside.any() and whole.all() and wide.shape[1] > 1:
        return wide
    outside |= sums >= 1
    if outside.any():
        bad = int(outside.nonzero()[0, 0])
        raise ValueError(f"X row {bad} is outside the simplex interior (every part > 0 and the sum < 1, or every "
                         "row a composition summing to 1); for counts or histograms use input='histograms'")
    return torch.cat([wide, (1 - sums)[:, None]], 1)


def predictive_log_density(x: torch.Tensor, groups: torch.Tensor, draw: dict) -> torch.Tensor:
    """ln p(X_n | the global sites of ``draw``) of the program, for transformed rows x (N, D) in
    groups ``groups``: the group atom (through the group's weights over global atoms) and the
    relevances phi_nl summed out,

        ln sum_k w_jk prod_l [eps_l Beta(x_nl | alpha_kl, beta_kl) + (1 - eps_l) Beta(x_nl | alpha'_l, beta'_l)].

    The sum over phi does not factor into matrix products, so rows go in blocks with a
    (rows, K, D) table each (the one such table in the zoo: a diagnostic, not a step)."""
    beta_log = lambda x, a, b: ((a - 1) * x.log() + (b - 1) * torch.log1p(-x) + torch.lgamma(a + b)
                                - torch.lgamma(a) - torch.lgamma(b))
    eps, alpha, beta = draw["saliency"], draw["alpha"], draw["beta"]
    log_w = draw["group_weights"].clamp_min(torch.finfo(x.dtype).tiny).log()
    out = []
    for rows in row_blocks(x.shape[0], alpha.numel(), device=x.device):
        background = torch.log1p(-eps) + beta_log(x[rows], draw["alpha_bg"], draw["beta_bg"])  # (B, D)
        relevant = eps.log() + beta_log(x[rows, None], alpha, beta)  # (B, K, D)
        per_atom = torch.logaddexp(relevant, background[:, None]).sum(-1)
        out.append(torch.logsumexp(log_w[groups[rows]] + per_atom, -1))
    return torch.cat(out)


class HDPGD(Estimator):
    """HDP mixture of generalized Dirichlet distributions with feature selection ([HDP-GD]).

    Parameters (keyword-only)
    ----------
    truncation : K, global atoms (eq. (20)).
    group_truncation : T, atoms per group (eq. (21)).
    inference : "vi" (batch, Algorithm 1), "online-vi" (minibatches: ``fit`` by memoized VI, batch
        VI's updates from per-batch sums, ``inference.hdp_gd.learner.fit_memoized``; ``partial_fit``
        by Algorithm 2's steps) or "svi" (Pyro's
        SVI on the program itself, with the mean-field guide of ``bnpzoo.guides.hdp_gd`` learning the
        global factors and the rows' z and phi summed out: ``bnpzoo.inference.hdp_gd.svi``).
    model : svi only: the program to fit, an edited copy of ``bnpzoo.models.hdp_gd.model`` (``bnpzoo
        new-model hdp-gd my_model.py``) with its signature; None: that program. Prediction and
        ``relevance`` score new rows with the shipped likelihood (eq. (16)). ``load`` needs it again.
    gamma, lam : the global and group concentrations (eq. (5), (9)), > 0.
    xi1, xi2 : the saliency prior Dir(xi1, xi2) (eq. (15)), > 0.
    prior_shape, prior_rate : the Gamma prior of every Beta parameter (eq. (17)-(18)); the default
        Gamma(1, 0.01) is an exponential prior with mean 100, vague on the scale of Beta
        parameters of proportions.
    input : "proportions" (rows inside the simplex, or compositions summing to 1; checked) or
        "histograms" (normalised; module docstring).
    floor : the histograms' floor c (module docstring), a share of the row's mean bin.
    max_iter : iterations (vi; default 1,500), passes over the data (online-vi; default 1,500) or
        steps (svi; default 300).
    tol : vi and online-vi stop when the bound changes by less than tol per observation between
        iterations (passes) and no saliency moves by more than 1e-3; svi when the bound changes by
        less than tol relative between two evaluations, 10 steps apart.
    batch_size : online-vi's minibatch (default: a fit's memoized batches, a pass of at most 20
        batches of at least 1,000 rows; a stream's steps, min(N, 200)); svi's (default None: every
        row).
    learning_rate : svi's step (Adam; default 0.005).
    learning_offset, learning_decay : eta0 and kappa of zeta_r = (eta0 + r)^(-kappa), eq. (32)
        needs 0.5 < kappa <= 1.
    merges : merge candidates tried at each check (a fit: whenever it has converged, judged on all
        the rows, and it goes on while a merge is kept; a stream's ``partial_fit``: after about 10
        evenly spaced minibatches a pass, judged on the minibatch); a merge is kept only when the
        bound rises. Default 5 (a fit) or 1 (a stream); 0 turns merges off.
    n_init : K-means restarts of the start.
    random_state, dtype, device, verbose : the seed, the precision ("float32" or "float64"), where to
        fit, and a progress bar, as in ``DPGMM``.

    Fitted attributes
    -----------------
    labels_ : the global atom of each training row, by the fitted q.
    saliency_ : E[eps_l1] per feature, how relevant each feature is.
    weights_ : E[psi_k], the global atoms' weights.
    group_weights_ : (M x K) each group's expected mixing over the global atoms.
    atoms_per_group_ : the global atoms used by the rows of each group.
    n_clusters_ : the global atoms used by some row.
    component_means_ : (K x D) E[alpha] / (E[alpha] + E[beta]) of the transformed coordinates.
    elbo_trace_ : vi: the bound per iteration; online-vi: the memoized bound per pass, then each
        stream minibatch's estimate of it, scaled to the data; svi: the program's bound with z and
        phi summed out, a Monte-Carlo estimate every 10 steps.
    converged_, n_iter_, n_passes_ : whether the convergence test passed, the iterations (steps) and
        the passes over the data run.
    fit_seconds_, n_features_in_ : the fit's wall time in seconds, and D.
    groups_ : the group labels as given (integers or names), sorted: the order of the group axis.
    posterior_ : the global factors (a dict of tensors).
    """

    _parameter_constraints = {
        "truncation": Interval(int, 2),  # the sticks of one atom are none: the program needs two
        "group_truncation": Interval(int, 2),
        "inference": OneOf(*INFERENCE),
        "gamma": Interval(float, 0, low_open=True),
        "lam": Interval(float, 0, low_open=True),
        "xi1": Interval(float, 0, low_open=True),
        "xi2": Interval(float, 0, low_open=True),
        "prior_shape": Interval(float, 0, low_open=True),
        "prior_rate": Interval(float, 0, low_open=True),
        "input": OneOf("proportions", "histograms"),
        "floor": Interval(float, 0, low_open=True),
        "max_iter": Interval(int, 1, optional=True),
        "tol": Interval(float, 0),
        "batch_size": Interval(int, 1, optional=True),
        "learning_offset": Interval(float, 0),
        "learning_decay": Interval(float, 0.5, 1.0, low_open=True),
        "merges": Interval(int, 0, optional=True),
        "learning_rate": Interval(float, 0, low_open=True, optional=True),
        "n_init": Interval(int, 1),
        "dtype": OneOf("float32", "float64"),
        "random_state": SEED,
        "verbose": OneOf(True, False),
    }
    _fitted_marker = "posterior_"
    _unsaved_params = _optional_code = ("model",)
    _fit_call = "fit(X, groups)"
    _fitted_attributes = ("labels_", "saliency_", "weights_", "group_weights_", "atoms_per_group_", "n_clusters_",
                          "component_means_", "elbo_trace_", "converged_", "n_iter_", "n_passes_", "fit_seconds_",
                          "n_features_in_", "groups_", "posterior_")

    def __init__(self, *, truncation: int = 30, group_truncation: int = 15, inference: str = "vi", gamma: float = 1.0,
                 lam: float = 1.0, xi1: float = 1.0, xi2: float = 1.0, prior_shape: float = 1.0,
                 prior_rate: float = 0.01, input: str = "proportions", floor: float = 0.05,
                 max_iter: int | None = None, tol: float = 1e-4, batch_size: int | None = None,
                 learning_offset: float = 1.0, learning_decay: float = 0.6, merges: int | None = None,
                 model=None, learning_rate: float | None = None, n_init: int = 3, dtype: str = "float32",
                 device: str | None = None, random_state: int | None = None, verbose: bool = False):
        self._store(locals())

    def _validate_params(self):
        super()._validate_params()
        if self.model is not None and not callable(self.model):
            raise ValueError(f"model must be a Pyro program (a callable), got {self.model!r}")
        if self.model is not None and not LEARNERS[self.inference].takes_program:
            raise ValueError(f"model= is fitted by inference='svi', not {self.inference!r}: the closed-form "
                             "learners are derived for the shipped program")

    # -- input ---------------------------------------------------------------------------------
    def _prior(self) -> Prior:
        return Prior(gamma=float(self.gamma), lam=float(self.lam), xi=(float(self.xi1), float(self.xi2)),
                     shape=float(self.prior_shape), rate=float(self.prior_rate))

    def _proportions(self, X, device, *, fitting: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, ln |dX / dY| per row) in the fit's dtype: checked, normalised, transformed."""
        wide = self._rows(X, fitting=fitting, dtype=torch.float64, device=device,
                          n_features=None if fitting else self.n_features_in_)
        if self.input == "histograms":
            if (wide < 0).any():
                raise ValueError("X holds negative entries: histograms must be non-negative")
            parts = normalise_histograms(wide, self.floor)
        else:
            parts = _compositions(wide)
        y, remainder = parts[:, :-1], parts[:, -1]
        x = geometric_transform(y, remainder)
        tiny = torch.finfo(self._dtype).eps
        return x.clamp(tiny, 1 - tiny).to(self._dtype), -log_remaining_mass(y, remainder).to(self._dtype)

    def _group_index(self, groups, n: int, device, *, fitting: bool) -> torch.Tensor:
        if groups is None:
            if fitting:
                raise ValueError("HDPGD.fit needs groups: one group label (an integer or a name) per row of X")
            return None
        if np.shape(groups) != (n,):
            raise ValueError(f"groups must hold one label per row of X ({n}), got shape {np.shape(groups)}")
        if fitting:
            self.groups_, index = group_labels(groups)  # integers or names, kept as given
        else:
            index, unseen = fitted_positions(self.groups_, groups)
            if unseen is not None:
                raise ValueError(f"group {unseen!r} was not in the fit; pass groups=None to use the global mixture")
        return torch.as_tensor(index, device=device)

    def _observations(self, X, groups, device, *, fitting: bool = False):
        """(the rows sorted by group as ``Observations``, the sort order, ln |dX / dY| per row in
        X's order). With ``groups=None`` (not fitting) every row is in one pseudo-group 0."""
        x, log_jacobian = self._proportions(X, device, fitting=fitting)
        if fitting:
            self.n_features_in_ = np.shape(X)[1]
        index = self._group_index(groups, x.shape[0], device, fitting=fitting)
        n_groups = len(self.groups_)
        if index is None:
            index, n_groups = torch.zeros(x.shape[0], dtype=torch.long, device=device), 1
        order = torch.argsort(index, stable=True)
        return Observations.of(x[order], index[order], n_groups), order, log_jacobian

    # -- fitting -------------------------------------------------------------------------------
    @fit_threads
    @keeps_caller_state
    def fit(self, X, groups=None):
        """Fit on proportion vectors X (N x D) in ``groups`` (N labels, integers or names); returns self."""
        self._validate_params()
        self._forget_fit("_stream_rng")
        obs, order, _ = self._observations(X, groups, self._device_for(X), fitting=True)
        start = time.perf_counter()
        seed = int(self.random_state) if self.random_state is not None else int(torch.randint(2**31, ()))
        torch.manual_seed(seed)
        learner = LEARNERS[self.inference]
        g, trace, f = learner.fit(self, obs, self._prior(), seed)
        self.fit_seconds_ = time.perf_counter() - start
        self._finish(g, obs, order, trace, f=f)
        warn_if_unconverged(self, self.max_iter or learner.default_iterations)
        return self

    def _merges(self, stream: bool = False) -> int:
        return (1 if stream else 5) if self.merges is None else self.merges

    def _rows_per_step(self, n: int) -> int:
        learner = LEARNERS[self.inference]
        if learner.takes_program:  # Pyro's SVI: every row unless batch_size is given
            return min(n, self.batch_size or n)
        return self._batch_size(n) if learner.minibatches else n

    def _batch_size(self, n: int, stream: bool = False) -> int:
        """A stream's minibatch, or a fit's memoized batches (``inference.svi.memo_batch_size``)."""
        if self.batch_size is not None:
            return min(n, self.batch_size)
        return min(n, 200) if stream else memo_batch_size(n)

    def _schedule(self, n: int, stream: bool = False) -> Schedule:
        return Schedule(truncation=self.truncation, group_truncation=self.group_truncation, n_init=self.n_init,
                        merges=self._merges(stream), tol=self.tol, batch_size=self._batch_size(n, stream),
                        offset=self.learning_offset, decay=self.learning_decay, verbose=self.verbose)

    def fit_predict(self, X, groups=None) -> np.ndarray:
        """Fit, then the global atom of each training row (``labels_``; batch vi's can differ from
        ``predict(X, groups)``, ``_finish``)."""
        return self.fit(X, groups).labels_

    def _why_no_partial_fit(self):
        if not LEARNERS[self.inference].streams:
            return f"HDPGD(inference={self.inference!r}) has no partial_fit: a stream needs inference='online-vi'"
        return None

    @offered_if(_why_no_partial_fit)
    @fit_threads
    @keeps_caller_state
    def partial_fit(self, X, groups=None):
        """online-vi: one pass of minibatch steps over X, resuming the previous call's factors (the
        first call fits from scratch). Group labels must be those of the first call."""
        if not hasattr(self, "posterior_"):  # the first call: one pass from scratch
            max_iter, self.max_iter = self.max_iter, 1
            try:
                return self.fit(X, groups)
            finally:
                self.max_iter = max_iter
        self._validate_params()
        obs, order, _ = self._observations(X, groups, self.posterior_["theta"].device)
        if getattr(self, "_stream_rng", None) is not None:  # the stream's own draws, whatever the caller drew
            set_rng_state(self._stream_rng)
        perm = torch.randperm(obs.x.shape[0]).to(obs.x.device)
        estimates = []
        g, self.n_iter_ = online_pass(obs, Globals(**self.posterior_), self._prior(),
                                      self._schedule(obs.x.shape[0], stream=True), perm, self.n_iter_, estimates)
        self.n_passes_ += 1
        self._finish(g, obs, order, self.elbo_trace_ + torch.stack(estimates).tolist())
        return self

    # -- saving and resuming a stream (online-vi) ----------------------------------------------
    def _resume_state(self):
        """The RNG states where the stream stands, so that ``partial_fit`` after ``load`` draws the
        minibatches the uninterrupted stream would have (the factors are fitted attributes)."""
        if not LEARNERS[self.inference].streams or getattr(self, "_stream_rng", None) is None:
            return None
        return {"rng": self._stream_rng}

    def _resume(self, state) -> None:
        self._stream_rng = state["rng"]

    def _finish(self, g: Globals, obs: Observations, order: torch.Tensor, trace, f=None):
        """The fitted attributes from the global factors. The training rows' labels come from their
        local factors refitted to the final globals, from the fit's own relevances ``f`` where batch
        vi has them: those converged with the globals to a higher bound than ``predict``'s fresh
        start reaches (``benchmarks/reports/hdp_gd.md``), so there ``labels_`` can differ from
        ``predict(X)``. Elsewhere they are equal."""
        self._stream_rng = get_rng_state()  # where the stream stands: save and pickles keep it
        _, r, _, _ = local_step(obs, g, tables(g), iters=LOCAL_ITERS, f=f)
        self.posterior_ = {name: getattr(g, name) for name in Globals.__dataclass_fields__}
        labels = r.argmax(1)
        self.labels_ = _unsort(labels, order).cpu().numpy()
        self.elbo_trace_ = trace
        self.saliency_ = saliency_mean(g).cpu().numpy()
        self.weights_ = expected_log_weights(g.global_sticks[:, 0], g.global_sticks[:, 1]).exp().cpu().numpy()
        group_pi = expected_log_weights(g.group_sticks[..., 0], g.group_sticks[..., 1]).exp()
        self.group_weights_ = torch.einsum("mt,mtk->mk", group_pi, g.theta).cpu().numpy()
        used = np.zeros((len(self.groups_), self.truncation), dtype=bool)
        used[obs.groups.cpu().numpy(), labels.cpu().numpy()] = True
        self.atoms_per_group_ = used.sum(1)
        self.n_clusters_ = int(used.any(0).sum())
        a0, b0 = (f[..., 0] / f[..., 1] for f in (g.alpha, g.beta))
        self.component_means_ = (a0 / (a0 + b0)).cpu().numpy()

    # -- diagnostics ---------------------------------------------------------------------------
    _draw_dims = {"psi": ["global_stick"], "pi": ["group", "group_stick"], "w": ["group", "group_atom"],
                  "saliency": ["feature"], "alpha": ["atom", "feature"], "beta": ["atom", "feature"],
                  "alpha_bg": ["feature"], "beta_bg": ["feature"], "group_weights": ["group", "atom"]}

    def to_arviz(self, X, groups=None, *, num_draws: int = 200, random_state: int | None = 0):
        """ArviZ InferenceData: ``num_draws`` draws of the program's global sites (``psi``, ``pi``,
        ``w``, ``saliency``, ``alpha``, ``beta``, ``alpha_bg``, ``beta_bg``) from the fitted factors,
        with each group's weights over the global atoms; ln p(Y_n | draw) for every row with its
        group atom, its global atom and its feature relevances summed out (``log_likelihood``, a
        density of the proportions: the transform's Jacobian included, so models compare on the
        same data); the rows; the bound's trace (``sample_stats``). ``groups=None``: every row
        under the global mixture psi. Atoms do not switch labels between draws (each comes from
        its own factor)."""
        from bnpzoo.diagnostics import check_num_draws, inference_data

        self._check_fitted()
        g = Globals(**self.posterior_)
        obs, order, log_jacobian = self._observations(X, groups, g.theta.device)
        x, index = _unsort(obs.x, order), _unsort(obs.groups, order)
        draws = self._posterior_draws(check_num_draws(num_draws), np.random.default_rng(random_state))
        if groups is None:  # one pseudo-group: the global weights
            draws["group_weights"] = stick_breaking_log_weights(draws["psi"]).exp()[:, None]
        loglik = lambda draw: predictive_log_density(x, index, draw) + log_jacobian
        return inference_data(draws, loglik, {"x": x.cpu().numpy(), "groups": index.cpu().numpy()},
                              dims=self._draw_dims, bound=getattr(self, "elbo_trace_", None))

    def _posterior_draws(self, num_draws: int, rng) -> dict:
        """Draws of the global sites from q: Beta sticks, W_jt ~ Categorical(theta_jt), Beta
        saliencies, Gamma (shape, rate) Beta parameters; plus each group's weights over the
        global atoms, sum_t pi_jt [W_jt = k]."""
        g = Globals(**self.posterior_)
        like = g.theta
        as_tensor = lambda a: torch.as_tensor(a, dtype=like.dtype, device=like.device)
        numpy = lambda t: t.detach().cpu().double().numpy()
        beta = lambda pair: as_tensor(rng.beta(*np.moveaxis(numpy(pair), -1, 0), size=(num_draws,) + pair.shape[:-1]))
        gamma = lambda pair: as_tensor(rng.gamma(numpy(pair[..., 0]), 1 / numpy(pair[..., 1]),
                                                 size=(num_draws,) + pair.shape[:-1]))
        theta = numpy(g.theta)
        u = rng.random((num_draws,) + theta.shape[:-1] + (1,))
        w = torch.as_tensor((theta.cumsum(-1) < u).sum(-1).clip(max=theta.shape[-1] - 1), device=like.device)
        draws = {"psi": beta(g.global_sticks), "pi": beta(g.group_sticks), "w": w, "saliency": beta(g.saliency),
                 "alpha": gamma(g.alpha), "beta": gamma(g.beta), "alpha_bg": gamma(g.alpha_bg),
                 "beta_bg": gamma(g.beta_bg)}
        pi = stick_breaking_log_weights(draws["pi"]).exp()  # (S, M, T)
        draws["group_weights"] = torch.zeros(pi.shape[:2] + (self.truncation,), dtype=pi.dtype,
                                             device=pi.device).scatter_add_(-1, w, pi)
        return draws

    # -- prediction ----------------------------------------------------------------------------
    def _local(self, X, groups):
        """Local factors of new rows: their own group's atoms, or with groups=None the global mixture."""
        self._check_fitted()
        g = Globals(**self.posterior_)
        obs, order, log_jacobian = self._observations(X, groups, g.theta.device)
        if groups is None:  # one pseudo-group whose atoms are the global atoms, weighted by psi
            eye = torch.eye(self.truncation, dtype=obs.x.dtype, device=obs.x.device)
            g = g.replace(theta=eye[None], group_sticks=g.global_sticks[None])
        rho, r, f, lik = local_step(obs, g, tables(g), iters=LOCAL_ITERS)
        return obs, order, g, (rho, r, f, lik), log_jacobian

    def predict_proba(self, X, groups=None) -> np.ndarray:
        """q(global atom k) for each row, (N, K)."""
        _, order, _, (_, r, _, _), _ = self._local(X, groups)
        return _unsort(r, order).cpu().numpy()

    def predict(self, X, groups=None) -> np.ndarray:
        """The most probable global atom of each row."""
        return self.predict_proba(X, groups).argmax(1)

    def relevance(self, X, groups=None) -> np.ndarray:
        """q(phi_nl = 1): how relevant each feature is to each row's cluster, (N, D)."""
        _, order, _, (_, _, f, _), _ = self._local(X, groups)
        return _unsort(f, order).cpu().numpy()

    def score(self, X, groups=None) -> float:
        """Mean per-row bound on ln p(Y_n) (the local terms given the global factors, with the
        transform's Jacobian, so it is a density of the proportions)."""
        obs, _, g, local, log_jacobian = self._local(X, groups)
        return float(local_bound(obs, g, *local, tables(g)) / obs.x.shape[0] + log_jacobian.mean())
