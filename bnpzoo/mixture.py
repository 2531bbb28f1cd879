"""The estimator core of the stick-breaking mixtures: one class that fits a Pyro program with a
stick-breaking prior (``v``) over cluster means (``mu``) by the batch learner or any SVI learner.

``StickMixture`` is what ``DPGMM`` and ``PYPGGM`` are made of: a subclass names its program, its
component family (``bnpzoo.families``), its stick prior and its hyperparameters; everything else,
the K-means start, the data-driven scale, the learners, pruning, the fitted point summary,
prediction and ArviZ export, is here once. ``MixtureSVI`` fits a user's own copy of a program with
the generic learners.

The component scale. Every feature has one standard deviation std_d within every cluster, fixed
for the fit. Left unset it is ``default_sigma`` (a shared scale from the data's spread and the
K-means start) times ``relative_spreads`` (features whose spread exceeds twice the median
feature's are scaled down to it), and the K-means start runs in those units, x_d / r_d. A shared
scale would let one feature in large units drown the others: on scikit-learn's raw wine data
(proline spans 278 to 1680, hue 0.48 to 1.71) one shared scale gave NMI 0.34 (DPGMM) and 0.22
(PYPGGM), the per-feature default 0.74 and 0.86 (``benchmarks/reports/pyp_ggm.md``).

The step unit of the gradient learners. ``learning_rate`` is in units of K / I for the means (I the
Fisher information of a component's location per feature: 1 / std^2 for the Gaussian, 2 / std^2
for the Laplace) and K for the logit sticks: g of a cluster of weight pi_k is about pi_k I (mean_k
- mu_k), so eta = 1 is a Newton step for a cluster of weight 1 / K.
"""

import inspect
import time
import warnings

import numpy as np
import pyro
import torch

from bnpzoo._validation import FOLDER, SEED, Interval, OneOf, batch_features, is_stream
from bnpzoo.base import FittedTensor, MixtureEstimator, as_numpy, offered_if, warn_if_unconverged
from bnpzoo.caller_state import keeps_caller_state
from bnpzoo.diagnostics import arviz, mixing
from bnpzoo.docstrings import undocumented
from bnpzoo.families import BaseMeasure, ComponentPrior, TracedFamily, checked
from bnpzoo.inference import data_parallel
from bnpzoo.inference.kmeans import kmeans, nearest_centres
from bnpzoo.inference.svi import Schedule, memo_batch_size
from bnpzoo.inference.stick_mixture.sticks import expected_clusters, sort_by_size, truncation_tail
from bnpzoo.inference.stick_mixture.vmm import expectation, fit_vmm, prior_terms
from bnpzoo.mapped import centred_gram, column_sums, passes, take
from bnpzoo.inference.stick_mixture.learners import (GENERIC, INFERENCE, LEARNERS, STOCHASTIC, FitOutcome,
                                                      learner)
from bnpzoo.inference.stick_mixture.session import Options, Program, Pruning, Start, StochasticSession
from bnpzoo.inference.stick_mixture.sampler import StickMixtureKernel, coclustering, run_chains
from bnpzoo.inference.stick_mixture.split_merge import Target
from bnpzoo.ops import (conjugate_sticks, default_sigma, relative_spreads, stick_breaking_log_weights,
                        weights_to_sticks)
from bnpzoo.threads import fit_threads, small_work

# the least rows of vmm's K-means start (at least 20 per cluster, as for the stochastic learners):
# a sample of 2,000 gave the NMI of all the rows in a fraction of the time (benchmarks/reports/speed.md)
KMEANS_SAMPLE = 2000
# vmm's memoized batches (``inference.stick_mixture.vmm.memoized_expectation``) when batch_size is
# None: q moves once a batch; the same fit, faster on large data (benchmarks/reports/speed.md)
VMM_BATCH = 50_000
# the stochastic learners with moves on more rows start from vmm's fit of a sample of at least this many
# (``_session_start``; on 1,000 of the digits the fixed scale's fit kept 1 cluster, 13 on all 1,797), on
# fewer from this many K-means clusters (a learned spread), which births divide
START_FIT_ROWS, START_CLUSTERS = 5000, 2
# and of at least this many rows per cluster of the truncation: 100 clusters 8 sds apart (truncation 200) in a
# sample of 5,000 rows, 50 a cluster, left vmm 57 to 73 of them, every learner after it about half; 10,000, 99
START_FIT_PER_CLUSTER = 50
# a learned spread's prior guess is the data's covariance over this (``StickMixture._component_prior``)
SPREAD_SHRINK = 4.0
# the iterations (SVI: steps) of a fit whose learner has no cap of its own, where max_iter is None
MAX_ITER = 500
# the sampler records the labels of at most this many rows, drawn at random, for ``coclustering_``
COCLUSTERED_ROWS = 1000

# the arguments every stick mixture shares, with their allowed values
COMMON_CONSTRAINTS = {
    "truncation": Interval(int, 1),
    "prior_precision": Interval(float, 0, low_open=True),
    "pruning_precision": Interval(float, 0, optional=True),
    "split_moves": OneOf(None, False, True),
    "assignment": OneOf("hard", "soft", None),
    "guide": OneOf("map", "mean-field"),
    "max_iter": Interval(int, 1, optional=True),
    "tol": Interval(float, 0),
    "prune_threshold": Interval(float, 0, 1, high_open=True),
    "batch_size": Interval(int, 1, optional=True),
    "learning_rate": Interval(float, 0, low_open=True, optional=True),
    "n_init": Interval(int, 1),
    "dtype": OneOf("float32", "float64"),
    "random_state": SEED,
    "verbose": OneOf(True, False),
    "data_parallel": OneOf(False, True),
    "num_chains": Interval(int, 1, optional=True),
    "warmup": Interval(int, 0, optional=True),
    "checkpoint": FOLDER,
    "checkpoint_every": Interval(int, 1),
}
SHARED_PARAMETERS = """
    prior_precision : lambda0; each mean has prior N(mean of X, std^2 / lambda0) per feature, and
        its fitted value is pulled a fraction lambda0 / (N_k + lambda0) toward the data mean. The
        default 1 is a vague prior (as scikit-learn's mean_precision_prior). With a learned base
        measure, the most lambda0 may learn.
    base_measure : "learned" (default) or "fixed": with a learned spread (covariance "full", "diag",
        "spherical"), vmm learns the clusters' prior with the clusters, lambda0 (up to
        ``prior_precision``) and the spread guess Sigma0, by type-II maximum likelihood inside the
        bound (``families.base_measure``), from two starts whose better bound it keeps; the other
        learners take the prior vmm learns on their start's sample, the sampler vmm's on the data.
        "fixed": lambda0 = ``prior_precision`` and Sigma0 the data's covariance over 4 throughout.
        The fitted prior is ``prior_precision_`` and ``prior_covariance_``. On 2-D mixtures of 10 to
        50 clusters the fixed prior kept about half of them, the learned one nearly all
        (``benchmarks/reports/many_clusters.md``).
    pruning_precision : the learners' pruning phase (``inference.stick_mixture.vmm``): they first run to
        convergence (SVI: at most max_iter / 2 steps, or max_iter on the conjugate factors, where every
        record of the phase takes its optimum) with this stronger prior, under which the
        clusters K-means split off lose their members, then continue under ``prior_precision``,
        so the means end unbiased. None: the family's default (20 for the Gaussian, 100 for the
        Laplace, ``families.GeneralizedGaussianFamily.pruning_precision``); 0: no pruning phase.
        Measured on digits, iris, wine and breast cancer: the phase keeps the clustering of a
        prior of 20 pseudo-samples throughout (without it, lambda0 = 1 leaves 10 to 16 clusters),
        and on data drawn from the model the mean errors fall to those of scikit-learn's BGM
        (``benchmarks/reports/pyp_ggm.md``).
    split_moves : births, vmm's switch (the stochastic learners on the conjugate factors always make
        vmm's moves, ``inference.stick_mixture.session``): after the pruning phase, once the
        assignments settle, propose splitting every cluster in two and keep the splits that raise
        the bound (``inference.stick_mixture.vmm``, scored without a pass over the data), until none
        is kept; vmm otherwise only ever closes clusters. None (default): on for vmm. Judged on
        eight labelled sets (iris, wine, breast cancer, digits, and R's ais, Pima.tr, RootStock
        and crabs, standardised), the defaults' NMI was the same with them on six and higher on
        two (breast cancer 0.380 to 0.384, RootStock 0.203 to 0.361, 3 clusters to 6 of its 6
        rootstocks); on 100,000 x 32 they added a round of 2-means per cluster (7.2 to 8.3 s).
    assignment : "hard" (MAP assignments, [DPM-SGA] eq. (15)) or "soft" (responsibilities; under
        SVI the assignments are summed out by enumeration). None: soft with a learned spread; on the
        fixed scale the papers' choice, hard for every learner but vi. sga-fisher needs hard
        assignments on the fixed scale.
    guide : "map" (Delta sites) or "mean-field" (Normal means, Beta sticks); vi only (the papers'
        learners use the MAP guide, natgrad-svi the conjugate mean-field guide).
    max_iter : the most iterations (SVI: steps) a fit runs; None: the estimator's default (500;
        ``PYPGGM``: 2,000 for a likelihood other than the Gaussian). For gibbs, the sweeps each
        chain keeps (None: 200). A fit that reaches it before
        its convergence test passes warns (``ConvergenceWarning``).
    tol : what counts as converged: for vmm with hard assignments, at most a fraction tol of the
        samples changed cluster in an iteration; for vmm with soft assignments and the SVI learners,
        the bound's relative change (SVI: between two evaluations, 10 steps apart). Both mean the
        same at every N.
    prune_threshold : clusters whose stick falls below it are dropped ([PYPM-sVMM] V.D).
    batch_size : minibatch size of the SVI learners (None: on the conjugate factors, min(N, max(1,000,
        min(10,000, N / 20))), the batches of their memoized record (``inference.stick_mixture.memo``); else full
        batch for vi, min(N, 1000) for the papers' learners); for vmm, the rows of each memoized
        batch, after which q is re-estimated from every batch's statistics (None: 50,000; N or
        more: batch vmm).
    learning_rate : the step eta of the SVI learner (None: its default, ``inference.stick_mixture.learners.LEARNERS``:
        Adam 0.05 for vi, 0.1 for sga-fisher as in [DPM-SGA], 0.02 for svmm). On the conjugate
        factors (the Gaussian and Bernoulli families; on the fixed scale every learner but vi) eta
        is a fraction of the natural gradient (1: the minibatch's conjugate optimum), and
        sga-momentum's default is 0.01 (``session.Learner.natural_rate``). Elsewhere (the Laplace family,
        vi on the fixed scale, a user's program): vi and svmm move
        each coordinate by about eta whatever its gradient, so their eta for the means is in units
        of the component's standard deviation, one per feature. For sga,
        sga-momentum, svmm-mgrad and svmm-grad, whose steps scale with the gradient, eta is in the
        units of ``bnpzoo.mixture``'s docstring (eta = 1 is a Newton step for a cluster of weight
        1 / K). svmm-grad is then the same rule as sga ([PYPM-sVMM]'s case 1 is [DPM-SGA]'s
        constant-step ascent); they differ only in name. vmm and natgrad-svi (steps (1 + t)^-0.5)
        take none: setting it for them is an error.
    n_init : K-means restarts for the initialisation ([DPM-SGA] Algorithm 1, 3.iv). K-means runs
        on a random subset of min(N, max(20 K, b)) samples, b the batch size for the papers' learners
        and 2,000 for vmm (which then starts every sample at its nearest centre); vi uses them all.
    device, dtype : where and in which precision to fit (default: the data's device, float32). Data
        further than 100 times its spread from zero fits in float64 with a warning (float32 cannot
        separate its clusters there); further than 1e7 times, it is refused (centre it).
    random_state : seed for the initialisation and SVI (rank r of a data-parallel fit draws its
        minibatches from seed + r).
    verbose : progress bar; vmm's shows each iteration's clusters, objective and the seconds of its
        parts (the pass over the data, births, merges with their refinements).
    num_chains : the sampler's chains (inference="gibbs"; None: 4), run in worker processes where
        the machine has a core for each beside the caller's, else one after the other; R-hat and ESS
        of ``samples_`` compare them.
    warmup : the sampler's sweeps per chain before those it keeps (None: half of max_iter).
    checkpoint : the sampler's folder where each chain saves its state every ``checkpoint_every``
        sweeps and at its end (one file per chain, ``inference.checkpoint``). A fit given a folder
        that holds a stopped run's files resumes it: each chain replays its saved samples and
        sweeps on from its saved state and random generators, so the result equals the
        uninterrupted run's (on CPU, bitwise). Fitting again with a larger ``max_iter`` continues
        the chains; files of other data or settings are refused. None: no checkpoints.
    checkpoint_every : sweeps between a chain's checkpoints.
    data_parallel : fit with the ranks of the ``torch.distributed`` default process group (started
        by ``torchrun``, or by the caller's ``init_process_group``), the stochastic learners only.
        Every rank calls ``fit(X)`` with its own rows X; each step's minibatch is the union of the
        ranks' minibatches (``inference.data_parallel``), the K-means start runs on a sample of every
        rank's rows, and every rank ends with the same fitted model (``bnpzoo.rank_rows`` gives a
        rank its share of a whole array, a memory-mapped file's included).
"""
# every stick mixture's fitted attributes (an estimator's docstring lists those it has: ``docstrings.undocumented``)
FITTED_ATTRIBUTES = """
    means_ : (K' x D) the clusters' means (DPBMM: their probabilities of a 1), K' the clusters kept.
    covariances_ : the clusters' covariances at the fitted precisions, in scikit-learn's shapes: (K', D,
        D) full, (K', D) diag and fixed, (K',) spherical (DPBMM: the variances mu (1 - mu)).
    prior_precision_, prior_covariance_ : the clusters' prior the fit ended with: lambda0, the means'
        pseudo-samples, and Sigma0, the spread a cluster is expected to have (learned with
        ``base_measure="learned"``; the fixed scale's diag(std^2) on a fixed scale).
    components_ : the learned spreads as the family holds them (a dict of tensors, one row per cluster:
        the Normal-Wishart's or Normal-Gamma's fitted precision factors); {} on a fixed scale.
    covariance_type_ : the component family the fit used ("full", "diag", "spherical" or "fixed"), the
        ``covariance=None`` rule resolved.
    sticks_ : (K' - 1) the stick-breaking fractions of the kept clusters.
    weights_ : (K') the mixing weights.
    n_clusters_ : K', the clusters kept after pruning.
    scale_ : the component standard deviation, one per feature (the fixed scale, or on a learned one
        the data-driven scale the start used).
    sigma_ : ``scale_`` by its old name.
    rho_ : the generalized Gaussian's shape used (``rho``, else from ``likelihood``).
    mean_scale_ : (K' x D) the posterior standard deviation of each mean (the conjugate factor's, or
        the Laplace approximation's at the point estimate), which ``to_arviz`` draws from.
    stick_concentration_ : (2 x (K' - 1)) the sticks' conjugate factors q(v_k) = Beta(a_k + N_k, b_k
        + N_{>k}) at the fitted assignments.
    elbo_trace_ : the learner's objective per iteration (the SVI learners: every 10 steps, on a fixed
        minibatch).
    elbo_seconds_ : wall time since the start of the fit call, initialisation included, of each value
        in ``elbo_trace_``.
    phase_starts_ : where in ``elbo_trace_`` each prior phase begins (the bound changes there).
    converged_, n_iter_ : whether the convergence test passed (gibbs: whether the chains mixed, R-hat of
        ``rhat_`` at most 1.1), and the iterations (SVI: steps; gibbs: sweeps per chain, warm-up
        included) run.
    counts_ : (K') the expected training samples per cluster.
    labels_ : each training row's cluster (in a data-parallel fit, this rank's rows; in a stream, the
        last batch's).
    n_features_in_, fit_seconds_ : D, and the fit's wall time in seconds.
    samples_ : the sampler's draws by chain (inference="gibbs"), each (num_chains, max_iter): ``log_joint``,
        ln p(partition, X) with the clusters' parameters integrated out, ``n_clusters`` and ``n_small``
        (the clusters holding under 1 % of the rows); None for the other learners. ``to_arviz()``
        gives them to ArviZ (R-hat, ESS, trace plots).
    coclustering_ : (m, m) the share of the sampler's kept sweeps in which two of the rows
        ``coclustering_rows_`` (at most 1,000 of the training rows, drawn at random, in order) share
        a cluster; None for the other learners.
    acceptance_ : the sampler's accepted share of split and of merge proposals.
    rhat_ : the sampler's R-hat of ``log_joint`` and of ``n_clusters`` over its chains (split R-hat,
        one chain too); above 1.1 the fit warns (``ConvergenceWarning``) with the sweeps that would do.
    model_kwargs_ : the program's keyword arguments, the data-driven defaults filled in.
    tensors_ : the tensors behind the fitted arrays, on the fit's device (``tensors_["means_"]``, ...);
        the attributes themselves are numpy arrays, as scikit-learn's.
"""
FITTED = ("means_", "components_", "prior_precision_", "prior_covariance_", "sticks_", "weights_", "n_clusters_",
          "scale_", "elbo_trace_", "phase_starts_",
          "converged_", "n_iter_", "counts_", "n_features_in_", "fit_seconds_", "mean_scale_", "stick_concentration_",
          "elbo_seconds_", "labels_", "samples_", "coclustering_", "coclustering_rows_", "acceptance_", "rhat_")


class StickMixture(MixtureEstimator):
    """Base of the stick-breaking mixture estimators (see the module docstring).

    A subclass implements ``_program()`` (the Pyro program), ``_family()``, ``_stick_prior()``
    (alpha and discount), ``_given_scale()`` (the user's component standard deviation or None)
    and ``_program_kwargs(std, prior_mean)`` (the program's hyperparameters).
    """

    _fitted_attributes = FITTED
    # the fitted parameters: numpy arrays to the caller, tensors on the fit's device in ``tensors_``
    means_, weights_, sticks_, counts_ = FittedTensor(), FittedTensor(), FittedTensor(), FittedTensor()
    scale_, mean_scale_, stick_concentration_ = FittedTensor(), FittedTensor(), FittedTensor()
    prior_covariance_ = FittedTensor(None, has_default=True)  # None in files saved before it
    prior_precision_ = None
    components_ = FittedTensor({}, has_default=True)  # files saved before the learned spreads hold none
    # the sampler's (``_record_chains``); None for the other learners and in files saved before it
    samples_ = coclustering_ = coclustering_rows_ = acceptance_ = rhat_ = None

    # -- fitting -----------------------------------------------------------------------------
    @fit_threads
    @keeps_caller_state
    def fit(self, X, y=None):
        """Fit on X (N x D); returns self."""
        self._validate_params()
        self._forget_fit("_session", "_saved_session")
        group = self._group()
        x = self._rows(X, fitting=True, dtype=self._dtype, device=self._device_for(X), widen=True, group=group)
        self._check_program(x)
        start = time.perf_counter()
        if self.random_state is not None:
            pyro.set_rng_seed(int(self.random_state) + data_parallel.rank(group))
        family = self._settle(x)
        outcome = self._learner().fit(self, x, family, start)
        self._record(x, outcome, start)
        warn_if_unconverged(self, self._iterations(), outcome.unconverged)
        return self

    def _learner(self):
        """The record of ``inference`` (``inference.stick_mixture.learners``)."""
        return learner(self.inference)

    def _fit_batch(self, x, family, start, max_iter=None) -> FitOutcome:
        """vmm's fit: every row at its nearest K-means centre, then the closed-form passes (at most
        ``max_iter``; None: the estimator's)."""
        init_means, labels, self.scale_, prior_mean, _ = self._start(x, self._start_sample(x, KMEANS_SAMPLE),
                                                                     label_all=True)
        prior = self._component_prior(x, prior_mean, self._fitted("scale_"))
        settings = dict(self._vmm_settings(family), **({} if max_iter is None else {"max_iter": max_iter}))
        fit = fit_vmm(x, labels, init_means.shape[0], family=family, prior=prior, **settings,
                      batch_size=self.batch_size or VMM_BATCH, verbose=self.verbose, clock_start=start)
        return FitOutcome(fit.point, fit.sticks, None, fit.objective_trace, fit.seconds, fit.n_iter, fit.converged,
                          fit.phase_starts, prior=fit.prior)

    def _fit_sampler(self, x, family, start) -> FitOutcome:
        """gibbs: chains of the split-merge sampler from one cluster (``inference.stick_mixture.sampler``),
        under the prior vmm fits with (the fixed family's scale from the K-means start); the fitted
        clusters are the last partition of the chain that ends highest."""
        _, _, self.scale_, prior_mean, _ = self._start(x, self._start_sample(x, KMEANS_SAMPLE))
        prior = self._component_prior(x, prior_mean, self._fitted("scale_"))
        if self._learns_base_measure(family):  # empirical Bayes: the prior vmm learns on the data
            prior = self._fit_batch(x, family, start, max_iter=MAX_ITER).prior  # vmm's own cap, not the sweeps
        scaled = x / x.std(0).clamp_min(torch.finfo(x.dtype).tiny)  # the split templates' units
        target = Target(family, prior, scaled=scaled, **self._stick_prior())
        watched = torch.randperm(x.shape[0])[:COCLUSTERED_ROWS].sort().values
        kernel = StickMixtureKernel(target, x, rows_term=family.rows_term(x, prior), watched=watched,
                                    seed=None if self.random_state is None else int(self.random_state),
                                    checkpoint=self._checkpoint(target, x, watched))
        chains = run_chains(kernel, num_samples=self._iterations(), warmup=self._warmup(),
                            num_chains=self._num_chains(), verbose=self.verbose)
        unmixed = self._record_chains(chains, watched)
        best = chains.chains[chains.best]
        stick, counts = self._stick_prior(), best["stats"]["count"]
        order = torch.argsort(counts, descending=True)
        stats = {name: value[order].to(x.device) for name, value in best["stats"].items()}
        point = family.point(family.natural(stats, prior), prior)
        shares = (stats["count"] - stick["discount"]) / (x.shape[0] + stick["alpha"])  # E[pi_k | partition]
        weights = torch.cat([shares, 1 - shares.sum(0, keepdim=True)]).to(x.dtype)
        return FitOutcome(point, weights_to_sticks(weights)[: order.numel() - 1], None, best["trace"], best["seconds"],
                          len(best["trace"]), unmixed is None, unconverged=unmixed, prior=prior)

    def _checkpoint(self, target, x, watched):
        """The chains' checkpoint folder, keyed to the data and every setting a chain's draws depend on."""
        from bnpzoo.inference.checkpoint import chain_checkpoint

        return chain_checkpoint(self.checkpoint, self.checkpoint_every, self._warmup() + self._iterations(), x,
                                target.prior, target.alpha, target.discount, type(target.family).__name__,
                                vars(target.family), watched, self.random_state, self._warmup())

    def _warmup(self) -> int:
        """The sampler's dropped sweeps per chain: ``warmup``, or half the kept ones."""
        return self.warmup if self.warmup is not None else self._iterations() // 2

    def _num_chains(self) -> int:
        return self.num_chains if self.num_chains is not None else self._learner().chains

    def _record_chains(self, chains, watched) -> str | None:
        """The sampler's summaries: each chain's draws and their R-hat, the ``watched`` rows'
        co-clustering, the moves taken; why the chains have not mixed (None: they have)."""
        self.mcmc_ = chains.mcmc
        self.samples_ = {name: value.cpu() for name, value in chains.mcmc.get_samples(group_by_chain=True).items()}
        self.rhat_, unmixed = mixing(self.samples_, ("log_joint", "n_clusters"), self._iterations())
        self.coclustering_rows_ = watched.numpy()
        recorded = torch.cat([chain["recorded"] for chain in chains.chains])
        self.coclustering_ = coclustering(recorded).numpy()
        moves = {kind: (sum(c["accepted"][kind] for c in chains.chains), sum(c["tried"][kind] for c in chains.chains))
                 for kind in ("split", "merge")}
        self.acceptance_ = {kind: taken / max(tried, 1) for kind, (taken, tried) in moves.items()}
        return unmixed

    def _vmm_settings(self, family) -> dict:
        """vmm's settings (``vmm.VMMSettings``) from this estimator's arguments, for its fit and for
        the stochastic learners' start (``_sample_fit``)."""
        return dict(hard=self._hard_assignments(), pruning_precision=self._pruning_precision(),
                    max_iter=self._iterations(), tol=self.tol, prune_threshold=self.prune_threshold,
                    split_moves=self.split_moves is not False, merge_moves=family.capabilities.moves,
                    base_measure=self._base_measure(), **self._stick_prior())

    def _base_measure(self):
        """How vmm learns the clusters' prior (``families.BaseMeasure``), or None where it holds it."""
        if getattr(self, "base_measure", "fixed") != "learned":  # MixtureSVI's programs hold their own
            return None
        return BaseMeasure(most_precision=self.prior_precision)

    def _learns_base_measure(self, family) -> bool:
        return self._base_measure() is not None and family.capabilities.base_measure

    def _fit_stochastic(self, x, start, max_iter=None, stream=False) -> FitOutcome:
        """An SVI learner's fit (or, with ``stream``, one batch of a stream, resuming the session)."""
        if not stream:
            self._session = None
        run = self._run_session(x, self._iterations() if max_iter is None else max_iter, start, stream=stream)
        return FitOutcome(*self._session.estimates, run.elbo_trace, run.seconds, run.n_iter, run.converged,
                          list(self._session.phase_starts), prior=self._session.component_prior)

    def _why_no_partial_fit(self):
        if not self._learner().streams:
            return (f"{type(self).__name__}(inference={self.inference!r}) has no partial_fit: a stream needs a "
                    f"stochastic learner ({', '.join(STOCHASTIC)})")
        return None

    @offered_if(_why_no_partial_fit)
    @fit_threads
    @keeps_caller_state
    def partial_fit(self, X, y=None):
        """One pass of minibatch steps over the batch X, resuming the last call; or, for a stream of
        batches (any iterable of arrays that is not an array itself: a generator, a DataLoader), one
        such call per batch; each batch stands in for the data set (N = len(X)). Returns self. A
        stream keeps the precision and device of its first fit
        (a loaded one's too): later batches are converted to them, so float32 rows continue a
        float64 model in float64."""
        if is_stream(X):
            batches = 0
            for batches, batch in enumerate(X, 1):
                self.partial_fit(batch_features(batch))
            if not batches:
                raise ValueError("X is an empty stream: it gave no batch to fit")
            return self
        self._validate_params()
        fitted = getattr(self, "tensors_", {}).get("means_")  # a stream keeps its first batch's precision and device
        group = self._group()
        x = self._rows(X, fitting=fitted is None, dtype=self._dtype if fitted is None else fitted.dtype,
                       device=self._device_for(X) if fitted is None else fitted.device,
                       n_features=getattr(self, "n_features_in_", None), widen=fitted is None, group=group)
        if getattr(self, "_session", None) is None:
            self._check_program(x)
        start = time.perf_counter()
        if getattr(self, "_session", None) is None and hasattr(self, "n_iter_"):  # loaded or unpickled
            if getattr(self, "_saved_session", None) is None:
                raise ValueError("this estimator holds no learner's state to resume (it was fitted by a "
                                 "learner without one, or saved by an older bnpzoo): partial_fit cannot continue "
                                 "its stream; fit a new one")
            self._session, self._saved_session = self._restore_session(self._saved_session), None
        if getattr(self, "_session", None) is None and self.random_state is not None:
            pyro.set_rng_seed(int(self.random_state) + data_parallel.rank(group))
        if fitted is None:
            self._settle(x)
        passes_here = -(-x.shape[0] // self._batch_size(x.shape[0]))
        outcome = self._fit_stochastic(x, start, int(data_parallel.largest(passes_here, group)), stream=True)
        outcome.trace = getattr(self, "elbo_trace_", []) + outcome.trace
        outcome.seconds = getattr(self, "elbo_seconds_", []) + outcome.seconds
        outcome.n_iter += getattr(self, "n_iter_", 0)
        self._record(x, outcome, start)
        return self

    def _check_program(self, x) -> None:
        """A subclass's check of its program on the validated data, before any learning starts (the
        user's program of ``MixtureSVI``); the zoo's own programs need none."""

    def _scale_tensor(self, x) -> torch.Tensor | None:
        """The user's component standard deviation as a (D,) tensor, or None."""
        given = self._given_scale()
        if given is None:
            return None
        std = torch.as_tensor(given, dtype=x.dtype, device=x.device)
        if std.ndim == 1 and std.numel() != x.shape[1]:
            raise ValueError(f"the component scale has {std.numel()} entries but X has {x.shape[1]} features; "
                             "give one number or one per feature")
        return std.expand(x.shape[1]).clone()

    def _settle(self, x):
        """Before a fit: what depends on the data's shape, the truncation's prior; returns the family,
        checked against the contract its capabilities promise (``families.contract``)."""
        self._resolve(x)
        self._check_truncation(x.shape[0])
        return checked(self._family())

    def _resolve(self, x) -> None:
        """Settle what depends on the data's shape before the fit (``DPGMM``: the covariance)."""

    def _check_truncation(self, n: int) -> None:
        """Warn where the truncated stick prior asks for one cluster: an alpha so large for the
        truncation K that the prior leaves most of its weight to the K-th cluster (``truncation_tail``),
        which every learner then fills. A truncation far above the rows is honoured as it is (the
        start has at most one cluster for two rows, and the prior beyond them is exact)."""
        prior = self._stick_prior()
        if prior.get("alpha") is None or self.truncation < 2:  # MixtureSVI's programs hold their own
            return
        tail = truncation_tail(self.truncation, **prior)
        if tail > 0.5:
            warnings.warn(f"alpha={prior['alpha']:g} is large for truncation={self.truncation}: the truncated prior "
                          f"gives its last cluster {tail:.0%} of the weight on average (without the truncation it "
                          f"expects about {expected_clusters(n, **prior):.0f} clusters among these {n} rows), so the "
                          "fit may put every row in one cluster; raise truncation or lower alpha", UserWarning,
                          stacklevel=5)  # the caller of fit (through keeps_caller_state and fit_threads)

    def _component_prior(self, x, prior_mean, std) -> ComponentPrior:
        """The clusters' prior: locations centred on the data's mean with ``prior_precision``
        pseudo-samples. The fixed family's spread is diag(std^2), the scale of the module docstring.
        A learned spread's prior guess Sigma0 (E[Lambda_k] = Sigma0^-1; with a learned base measure,
        where the fit starts from, ``families.base_measure``) is the data's covariance over
        ``SPREAD_SHRINK`` = 4 (half its spread along every axis; a scale the user gave is taken
        as it is, diag(std^2)), worth D samples (the least degrees of freedom of a proper Wishart).
        The data's covariance holds the spread between the clusters too: taken whole, as before,
        it made a cluster a priori as broad as the data, and the bound then ranked plain groups of a
        small table as one cluster (two cricket species on two features, 31 rows: 1 cluster on
        every seed, now 2, NMI 1.0). Chosen by measurement among the data's covariance over 1, 2,
        4, 8, 16 and 64, Fraley and Raftery's (2007) prior at one component (its mean covariance the
        data's at D + 2 degrees of freedom, a shrink that grows with D: 20 clusters in 32-D split
        into 22 to 32), mclust's volume scale and the evidence-maximising scale: 4 kept one cloud
        whole, the 20 clusters in 32-D (8 split them) and the families' tables (mean NMI 0.759 to
        0.778; ``benchmarks/reports/priors.md``). The K-means cells' scale as Sigma0 left three
        1-D clusters of 30,000 rows in 7 pieces (NMI 0.69) and diagonal clusters in 10-D in 21
        (``reports/families.md``)."""
        covariance = torch.diag(std**2)
        if self._family().capabilities.spread_prior and self._given_scale() is None:  # over every rank's rows
            gram, rows = data_parallel.all_sum([centred_gram(x, prior_mean), torch.tensor(float(x.shape[0]))],
                                               self._group())
            covariance = (gram / max(float(rows) - 1, 1)).to(x.dtype)
            floor = covariance.diagonal().mean() * 1e-6 + torch.finfo(x.dtype).tiny  # constant features
            covariance = (covariance + torch.diag(floor.expand(x.shape[1]))) / SPREAD_SHRINK
        return ComponentPrior(mean=prior_mean, mean_precision=float(self.prior_precision), covariance=covariance,
                              dof=float(x.shape[1]))

    def _group(self):
        """The process group of a data-parallel fit, or None."""
        return data_parallel.world_group(self.device) if self.data_parallel else None

    def _start_sample(self, x, floor: int):
        """The rows the K-means start runs on: min(N, max(20 K, ``floor``)) drawn at random, or all of
        them when that is N (the learners' floors: the minibatch, or ``KMEANS_SAMPLE`` for vmm); in
        a data-parallel fit, each rank's share of them."""
        size = -(-max(20 * self.truncation, floor) // data_parallel.size(self._group()))
        return x if size >= x.shape[0] else take(x, torch.randperm(x.shape[0])[:size].to(x.device))  # the CPU generator

    def _start(self, x, sample, label_all=False, most=None):
        """K-means on ``sample`` ([DPM-SGA] Algorithm 1, 3.iv) in the units of the component scale,
        the scale itself (per feature, the module docstring), the prior's centre, and the sample; the
        labels of ``sample``, or with ``label_all`` each row of x's nearest centre. In a data-parallel
        fit the ranks' samples are stacked (the sample returned) and rank 0's start is every rank's."""
        group = self._group()
        sample = data_parallel.gather_rows(sample, group)
        std = self._scale_tensor(x)
        metric = std if std is not None else relative_spreads(sample)
        # a cluster per row, or per repeated row, measures no spread: at least two distinct rows a cluster
        distinct = sample.shape[0] if sample.shape[0] > 2 * self.truncation else torch.unique(sample, dim=0).shape[0]
        clusters = min(self.truncation if most is None else most, sample.shape[0], max(2, distinct // 2))
        with small_work():  # a sample of a few thousand rows (bnpzoo.threads)
            centres, labels = kmeans(sample / metric, clusters, n_init=self.n_init,
                                     seed=None if self.random_state is None else int(self.random_state))
        if std is None:
            std = default_sigma(sample / metric, centres, labels) * metric
        if label_all and sample is not x:
            labels = nearest_centres(x, centres, metric)
        sums, rows = data_parallel.all_sum([column_sums(x), torch.tensor(float(x.shape[0]), dtype=torch.float64)],
                                           group)
        start = data_parallel.from_first((centres * metric, labels, std, (sums / rows).to(x.dtype)), group)
        return (*start, sample)

    def _validate_params(self):
        super()._validate_params()
        chosen = self._learner()
        if getattr(self, "split_moves", False) and not chosen.batch:
            raise ValueError(f"split_moves applies to inference='vmm', not inference={self.inference!r}")
        if self.data_parallel and not chosen.svi:
            raise ValueError(f"data_parallel=True needs an SVI learner ({', '.join(LEARNERS)}), not "
                             f"inference={self.inference!r}")
        for name in ("num_chains", "warmup", "checkpoint"):
            if getattr(self, name, None) is not None and chosen.chains is None:
                raise ValueError(f"{name} applies to inference='gibbs' (the sampler), not inference={self.inference!r}")
        if self.learning_rate is not None and chosen.learning_rate is None:
            raise ValueError(f"learning_rate does not apply to inference={self.inference!r}, whose steps follow "
                             "their own rule")
        alpha = self.get_params().get("alpha")  # MixtureSVI's programs hold their own
        as_fit = None if alpha is None else float(torch.tensor(alpha, dtype=self._dtype))
        # alpha that the fit's dtype rounds to 0 or inf makes the sticks' Beta(1 - d, alpha) improper
        if as_fit is not None and alpha > 0 and not 0 < as_fit < float("inf"):
            raise ValueError(f"alpha={alpha!r} is {as_fit} in {self.dtype}: give an alpha between "
                             f"{torch.finfo(self._dtype).tiny:.1e} and {torch.finfo(self._dtype).max:.1e}")
        discount = self.get_params().get("discount")  # the Pitman-Yor estimators'
        if discount is not None and not alpha > -discount:
            raise ValueError(f"alpha must be > -discount for Pitman-Yor sticks, got alpha={alpha} and "
                             f"discount={discount}")

    def _hard_assignments(self) -> bool:
        """The papers' MAP assignments ([DPM-SGA] eq. (15), [PYPM-sVMM] eq. (20)) on the fixed scale
        unless asked otherwise, for every learner but vi (which sums them out): natgrad-svi with
        responsibilities there gave digits' NMI 0.674 against 0.721 (random_state 0 to 4; vmm 0.730;
        0.711 once the pruning phase took vmm's pace, ``session.StochasticSession._settled``)."""
        chosen = self._learner()
        if self.assignment is None:  # the family's default (``families.contract``)
            return not chosen.enumerates and not self._family().capabilities.soft_assignments
        if chosen.needs == "fisher" and self.assignment == "soft":
            # F collects r_nk^2 while g collects r_nk: diffuse clusters get steps of order 1 / r_nk
            raise ValueError("assignment='soft' does not suit sga-fisher: its per-sample Fisher needs "
                             "one-hot assignments ([DPM-SGA] eq. (15)); use assignment='hard' or None")
        return self.assignment == "hard"

    def _grows(self) -> bool:
        """Whether the stochastic learner opens and closes clusters: it fits the conjugate factors
        (``learners.Learner.guide_kind``) in one process, with vmm's moves on a record of fixed batches
        (``inference.stick_mixture.memo``); False for arguments not validated yet (``_step_work``
        asks before ``fit`` validates)."""
        try:
            family = self._family()
            chosen = self._learner()
            return chosen.svi and not self.data_parallel and chosen.guide_kind(family) == "natural"
        except (KeyError, ValueError):
            return False

    def _rows_per_step(self, n):
        return n if self._learner().batch else self._batch_size(n)

    def _batch_size(self, n):
        if self.batch_size is not None:
            return min(self.batch_size, n)
        if self._grows():  # their births and merges are judged once a pass (``inference.stick_mixture.memo``)
            return memo_batch_size(n)
        return n if self._learner().enumerates else min(n, 1000)

    # the bound's prior terms, called by the SVI session with its current prior settings
    _log_prior = staticmethod(prior_terms)

    def _iterations(self) -> int:
        """``max_iter``, or where it is None the estimator's default (``_default_iterations``)."""
        return self.max_iter if self.max_iter is not None else self._default_iterations()

    def _default_iterations(self) -> int:
        """The iteration (SVI: step) cap that ``max_iter=None`` stands for: the learner's own (the
        sampler's kept sweeps), else 500."""
        return self._learner().iterations or MAX_ITER

    def _run_session(self, x, max_iter, clock_start, stream=False):
        batch, group = self._batch_size(x.shape[0]), self._group()
        if getattr(self, "_session", None) is None:
            if min(self.truncation, x.shape[0]) < 2:  # the model's stick plate has K - 1 entries
                raise ValueError(f"the SVI learners need truncation >= 2 and at least 2 samples to start, got "
                                 f"truncation={self.truncation} and {x.shape[0]} samples")
            start, std, prior_mean, prior = self._session_start(x, batch, group)
            self._session = self._new_session(start, std, prior_mean, prior,
                                              truncation=self.truncation if self._grows() else None)
            self.scale_ = std
        return self._session.run(x, Schedule(max_iter, batch, self.tol), clock_start=clock_start, verbose=self.verbose,
                                 group=group, stream=stream)

    def _session_start(self, x, batch: int, group):
        """(``Start``, the scale, the prior's centre, the conjugate factors' prior) of a new session. A
        learner with moves on more than ``START_FIT_ROWS`` rows starts from vmm's fit of a sample of
        them (``_sample_fit``): from two clusters, births took 7 records (each a pass) to open the 50
        clusters of 100,000 x 64 blobs. On fewer rows it starts from two K-means clusters (the fixed
        scale: ``truncation``, and a pruning phase), which births divide, as before (vmm's fit of
        rotated Laplace clouds of 2,800 rows held NMI 0.83, the births from two 0.87 to 0.99). The
        other learners start from K-means on a sample of at least a minibatch (vi: all the rows, a
        sample of each rank's in a data-parallel fit)."""
        grows, natural = self._grows(), self._learner().guide_kind(self._family()) == "natural"
        fitted = grows and x.shape[0] > START_FIT_ROWS
        floor = batch if not self._learner().enumerates else x.shape[0] if group is None else KMEANS_SAMPLE
        sample = self._start_sample(x, max(START_FIT_ROWS, batch, START_FIT_PER_CLUSTER * self.truncation)
                                    if fitted else floor)
        few = START_CLUSTERS if grows and not fitted and self._family().capabilities.moves else None
        init_means, labels, std, prior_mean, sample = self._start(x, sample, most=few)
        (n,) = data_parallel.all_sum([torch.tensor(float(x.shape[0]))], group)
        k, share = init_means.shape[0], float(n) / labels.numel()
        prior = self._component_prior(x, prior_mean, std)
        stats = None
        if fitted or natural and self._learns_base_measure(self._family()):
            # vmm's fit of the sample: its clusters' statistics, and the prior it learned
            fitted_stats, prior = self._sample_fit(sample, labels, k, prior)
        if fitted:
            stats = fitted_stats
            init_means = self._family().point(self._family().natural(stats, prior), prior)["means"]
        elif natural:  # the K-means clusters' statistics
            stats = self._family().label_statistics(sample, labels, k, prior)
        counts = (stats["count"] if stats is not None else torch.bincount(labels, minlength=k).to(x.dtype)) * share
        order, _ = sort_by_size(counts, **self._stick_prior())
        init_stats = None if stats is None else {name: share * value[order] for name, value in stats.items()}
        return Start(init_means[order], counts[order], init_stats, fitted=fitted), std, prior_mean, prior

    def _sample_fit(self, sample, labels, k: int, prior) -> tuple:
        """The statistics of vmm's fit of ``sample`` from ``labels`` (its clusters only), and its prior
        (learned, with a learned base measure)."""
        family = self._family()
        fit = fit_vmm(sample, labels, k, family=family, prior=prior, **self._vmm_settings(family))
        scored = torch.zeros(sample.shape[0], dtype=torch.long, device=sample.device)  # labels the value would score
        return expectation(sample, family, fit.prior, (fit.q, fit.point, fit.sticks), self._hard_assignments(),
                           scored)[1].stats, fit.prior

    def _new_session(self, start: Start, std, prior_mean, component_prior=None, truncation=None) -> StochasticSession:
        """``truncation``: the clusters births may open (None: the start's; no moves)."""
        grows = truncation is not None
        precision = self.prior_precision if component_prior is None else component_prior.mean_precision
        prior = dict(std=std, prior_mean=prior_mean, prior_precision=precision, **self._stick_prior())
        program = Program(self._program(), self._program_kwargs(std, prior_mean), self._log_prior)
        # the pruning phase's steps: half the fit's, all of them with moves (its record converges in
        # about as many evaluations as vmm's phase in iterations, then it stops)
        pruning = Pruning(self._pruning_precision(), self._iterations() if grows else self._iterations() // 2,
                          self.prune_threshold)
        options = Options(guide=self.guide, hard=self._hard_assignments(), learning_rate=self.learning_rate,
                          occam=self._occam, truncation=truncation, moves=grows)
        return StochasticSession(self._learner(), self._family(), program, start, prior, component_prior, pruning,
                                 options)

    # -- saving and resuming a stream ----------------------------------------------------------
    def _resume_state(self):
        """The stochastic learner's session (``StochasticSession.state_dict``), which ``save`` and
        pickles keep so that ``partial_fit`` continues the stream after ``load``; None for vmm."""
        if getattr(self, "_session", None) is not None and self._learner().streams:
            return self._session.state_dict()
        return getattr(self, "_saved_session", None)

    def _resume(self, state) -> None:
        self._saved_session = state

    def __getstate__(self):
        """Pickles hold the fitted model and the session's state (Pyro's guides are closures, so
        the session itself is rebuilt on the next ``partial_fit``)."""
        out = {name: value for name, value in self.__dict__.items() if name != "_session"}
        out["_saved_session"] = self._resume_state()
        return out

    def _restore_session(self, state) -> StochasticSession:
        """The session of ``state`` on a fresh guide and optimizer of this estimator's learner."""
        k = int(state["model_kwargs"]["truncation"])
        fitted = self._fitted("means_")
        means = torch.zeros(k, self.n_features_in_, dtype=fitted.dtype, device=fitted.device)
        prior = state["prior"]
        component_prior, init_stats = None, None
        if state.get("component_prior") is not None:  # a natural guide's shapes; load_state_dict sets its values
            component_prior = ComponentPrior(**state["component_prior"])
            init_stats = self._family().statistics(means[:1], means.new_zeros(1, k), component_prior)
        session = self._new_session(Start(means, state["counts"], init_stats), prior["std"], prior["prior_mean"],
                                    component_prior, truncation=self.truncation if self._grows() else None)
        session.load_state_dict(state)
        return session

    def _record(self, x, outcome: FitOutcome, start):
        self.n_features_in_ = x.shape[1]
        prior = outcome.prior
        self.prior_precision_ = self._prior_precision() if prior is None else prior.mean_precision
        self.prior_covariance_ = None if prior is None else prior.covariance
        self._finalise(x, outcome.point, outcome.sticks, outcome.scale)
        self.elbo_trace_, self.elbo_seconds_ = [float(v) for v in outcome.trace], [float(v) for v in outcome.seconds]
        self.phase_starts_ = list(outcome.phase_starts)
        self.n_iter_, self.converged_ = outcome.n_iter, bool(outcome.converged)
        self.fit_seconds_ = time.perf_counter() - start
        self._check_finite(bound=self.elbo_trace_, means=self._fitted("means_"), weights=self._fitted("weights_"),
                           scale=self._fitted("scale_"))

    def _finalise(self, x, point, sticks, scale):
        """Order clusters by weight and keep those that own a training sample ([PYPM-sVMM] V.D); in a
        data-parallel fit, a sample of any rank. ``point`` holds the family's point estimates
        (``means`` and, for a learned spread, the clusters' precisions)."""
        family, group, means = self._family(), self._group(), point["means"]
        log_w = stick_breaking_log_weights(sticks)
        owners = torch.zeros(means.shape[0], dtype=torch.long, device=x.device)
        labels = torch.empty(x.shape[0], dtype=torch.long, device=x.device)
        for rows in passes(x, means.shape[0]):
            labels[rows] = (log_w + family.log_density(x[rows], point)).argmax(1)
            owners += torch.bincount(labels[rows], minlength=means.shape[0])
        (owners,) = data_parallel.all_sum([owners], group)
        order = torch.argsort(log_w, descending=True)
        keep = order[owners[order] > 0]
        # each row's cluster in the kept order: predict(X) on the rows fitted (this rank's, in a
        # data-parallel fit; the last batch's, in a stream)
        rank = torch.empty_like(owners)
        rank[keep] = torch.arange(keep.numel(), device=keep.device)
        self.labels_ = rank[labels].cpu().numpy()
        weights = log_w[keep].exp()
        self.means_, self.weights_, self.n_clusters_ = means[keep], weights / weights.sum(), int(keep.numel())
        # the learned spreads, one per cluster ({} for a fixed scale, "std", shared by every cluster)
        self.components_ = {name: value[keep] for name, value in point.items() if name not in ("means", "std")}
        self.sticks_ = weights_to_sticks(self._fitted("weights_"))
        # renormalising the kept weights shifts every column alike: the softmax is unchanged
        counts = x.new_zeros(self.n_clusters_)
        for rows in passes(x, self.n_clusters_):
            counts += torch.softmax(self._log_joint_table(x[rows]), 1).sum(0)
        (counts,) = data_parallel.all_sum([counts], group)
        self.counts_ = counts
        # posterior factors for ArviZ: the mean-field guide's own scales where it has them, else
        # the Laplace approximation at the point estimate, precision N_k I + lambda0 / std^2 per
        # feature (the conjugate factor N(mean_k, std^2 / (N_k + lambda0)) for the Gaussian), and
        # the sticks' conjugate factors q(v_k) = Beta(a_k + N_k, b_k + N_{>k})
        laplace = family.mean_scale(self._point(), counts, self.prior_precision_)
        self.mean_scale_ = scale[keep] if scale is not None else laplace
        self.stick_concentration_ = torch.stack(conjugate_sticks(counts, **self._stick_prior()))

    def _prior_precision(self) -> float:
        return self.prior_precision

    _occam = True  # the means' factors' expectation in the assignments and the bound

    def _pruning_precision(self):
        given = self.pruning_precision
        return self._family().pruning_precision if given is None else given

    # -- the fitted model ----------------------------------------------------------------------
    def _point(self) -> dict:
        """The fitted clusters' point estimates, as the family's ``log_density`` takes them: the
        means and the learned spreads (``components_``), or the fixed scale."""
        means, components = self._fitted("means_"), self._fitted("components_")
        return {"means": means, **components} if components else {"means": means, "std": self._fitted("scale_")}

    @property
    def covariances_(self) -> np.ndarray:
        """The clusters' covariances at the fitted precisions, in scikit-learn's shapes: (K, D, D)
        full, (K, D) diag and fixed, (K,) spherical."""
        self._check_fitted()
        return as_numpy(self._family().covariances(self._point()))

    def _logits(self, x, out=None):
        """The log joint table up to a constant per row. Gaussian components of a fixed scale: ln pi_k
        - sum_d mu_kd^2 / (2 std_d^2) + sum_d x_nd mu_kd / std_d^2, one matrix product and one add."""
        if getattr(self._family(), "rho", None) != 2.0 or self._fitted("components_"):
            return super()._logits(x, out)
        means, var = self._fitted("means_"), self._fitted("scale_")**2
        bias = self._fitted("weights_").log() - (means * means / var).sum(1) / 2
        return torch.mm(x, (means / var).T, out=out).add_(bias)

    def _log_joint_table(self, x):
        return self._fitted("weights_").log() + self._family().log_density(x, self._point())

    def to_arviz(self, X=None, *, num_draws: int = 200, random_state: int | None = 0):
        """With X, ArviZ InferenceData of draws from the fitted posterior factors and the log-likelihood
        of X's rows (``MixtureEstimator.to_arviz``); without X, the sampler's chains (inference="gibbs":
        ``samples_`` as the ``posterior`` group, for ``arviz.summary``, ``arviz.rhat``, ``plot_trace``)."""
        if X is not None:
            return super().to_arviz(X, num_draws=num_draws, random_state=random_state)
        self._check_fitted()
        if self.samples_ is None:
            raise ValueError(f"to_arviz() without X exports a sampler's chains, and inference={self.inference!r} "
                             "has none: give X (the rows whose log-likelihood to export)")
        return arviz().from_dict(posterior={name: np.asarray(value) for name, value in self.samples_.items()})

    def _posterior_draws(self, num_draws, rng):
        means = self._fitted("means_")
        as_tensor = lambda a: torch.as_tensor(a, dtype=means.dtype, device=means.device)
        noise = as_tensor(rng.standard_normal((num_draws,) + tuple(means.shape)))
        c1, c0 = self.stick_concentration_.astype(np.float64)
        sticks = as_tensor(rng.beta(c1, c0, size=(num_draws, c1.size)))
        draws = {"v": sticks, "mu": means + self._fitted("mean_scale_") * noise,
                 "weights": stick_breaking_log_weights(sticks).exp()}
        if self._fitted("components_"):  # the program's site: the clusters' precisions, held at their fitted values
            precision = self._family().precision(self._point())
            draws["precision"] = precision.expand((num_draws,) + tuple(precision.shape))
        return draws

    def _draw_log_likelihood(self, x, draw):
        point = dict(self._point(), means=draw["mu"])
        return torch.logsumexp(draw["weights"].log() + self._family().log_density(x, point), 1)


def documented(cls):
    """Decorate a stick mixture: its docstring gains the entries of ``SHARED_PARAMETERS`` for the
    parameters it takes and does not describe, and ``FITTED_ATTRIBUTES``' for those it has."""
    cls.__doc__ += undocumented(cls, SHARED_PARAMETERS, FITTED_ATTRIBUTES)
    return cls


@documented
class MixtureSVI(StickMixture):
    """Fit your own stick-breaking mixture program with the generic SVI learners.

    Copy the program ``bnpzoo.models.dp_gmm`` (or ``pyp_ggm``) to a file of your own
    (``bnpzoo new-model dp-gmm my_model.py``), edit it (another likelihood, another prior), and fit
    its program, the function ``model`` in that file::

        import my_model
        est = MixtureSVI(model=my_model.model, inference="svmm", truncation=30).fit(X)
        est.predict(X); est.means_; est.weights_; est.elbo_trace_

    The program must keep the contract of the zoo's mixtures: ``model(data, *, truncation,
    subsample_size, ...)`` with latent sites ``v`` (K - 1 sticks) and ``mu`` (K x D means), an
    assignment ``z`` marked for enumeration and the observation ``x`` under a plate named
    ``"data"``. ``model_kwargs`` are passed to it; the program's own ``sigma`` / ``scale`` and
    ``prior_mean``, where it takes them and ``model_kwargs`` does not set them, get the data-driven
    defaults (the module docstring). Its ``alpha`` and ``discount`` (from ``model_kwargs`` or its
    defaults) set the sticks of the start and of pruning. Where the program takes
    ``prior_precision``, the learners' pruning phase runs with ``pruning_precision`` (as in
    ``DPGMM``); the means' Occam term of the zoo's own families needs their likelihood, and is
    not applied to a user's program.

    ``load`` needs the program again: ``MixtureSVI.load(path, model=my_model.model)``.

    Parameters (keyword-only)
    ----------
    model : the Pyro program to fit (a callable keeping the contract above).
    inference : the learner: "vi", "sga", "sga-momentum", "svmm", "svmm-mgrad" or "svmm-grad" (those
        that need no closed form), as ``DPGMM``'s.
    model_kwargs : a dict of the program's keyword arguments (None: its defaults, with the data-driven
        scale and prior mean).
    truncation : int, K, the most clusters the fit can use.
    pruning_precision : the learners' pruning phase runs with the program's ``prior_precision`` set to
        it (where the program takes one); then with the program's own. 0: no pruning phase.
    """

    _parameter_constraints = {
        "inference": OneOf(*GENERIC),
        **{name: c for name, c in COMMON_CONSTRAINTS.items()
           if name not in ("prior_precision", "split_moves", "num_chains", "warmup", "checkpoint", "checkpoint_every")},
    }
    _fitted_attributes = FITTED + ("model_kwargs_",)
    _unsaved_params = ("model",)
    SCALE_NAMES = ("sigma", "scale")

    def __init__(self, *, model=None, inference="svmm", model_kwargs=None, truncation=50, pruning_precision=20.0,
                 assignment=None, guide="map", max_iter=500, tol=1e-5, prune_threshold=1e-3, batch_size=None,
                 learning_rate=None, n_init=3, device=None, dtype="float32", random_state=None, verbose=False,
                 data_parallel=False):
        self._store(locals())

    def _validate_params(self):
        super()._validate_params()
        if not callable(self.model):
            raise ValueError(f"model must be a Pyro program (a callable), got {self.model!r}")
        if self.model_kwargs is not None and not isinstance(self.model_kwargs, dict):
            raise ValueError(f"model_kwargs must be a dict of the program's keyword arguments, "
                             f"got {self.model_kwargs!r}")

    # -- what the program declares -------------------------------------------------------------
    def _declared(self, name, fallback):
        """The value of the program's keyword ``name``: model_kwargs, else its default, else ``fallback``."""
        given = self.model_kwargs or {}
        if name in given:
            return given[name]
        parameter = inspect.signature(self.model).parameters.get(name)
        return fallback if parameter is None or parameter.default is inspect.Parameter.empty else parameter.default

    def _takes(self, name) -> bool:
        return name in inspect.signature(self.model).parameters

    def _scale_name(self):
        return next((name for name in self.SCALE_NAMES if self._takes(name)), None)

    def _given_scale(self):
        name = self._scale_name()
        return (self.model_kwargs or {}).get(name) if name else 1.0

    def _stick_prior(self) -> dict:
        return dict(alpha=float(self._declared("alpha", 1.0)), discount=float(self._declared("discount", 0.0)))

    def _prior_precision(self) -> float:
        return float(self._declared("prior_precision", 0.0))

    @property
    def prior_precision(self):  # for the SVI session's settings; the program owns its prior
        return self._prior_precision()

    def _program(self):
        return self.model

    def _program_kwargs(self, std, prior_mean) -> dict:
        """``model_kwargs`` with the data-driven defaults filled in; kept as ``model_kwargs_``, from
        which the fitted model's component table is traced."""
        kwargs = dict(self.model_kwargs or {})
        name = self._scale_name()
        if name is not None:
            kwargs.setdefault(name, std)
        if self._takes("prior_mean"):
            kwargs.setdefault("prior_mean", prior_mean)
        self.model_kwargs_ = kwargs
        return kwargs

    def _family(self):
        kwargs = getattr(self, "model_kwargs_", None)
        if kwargs is None:
            kwargs = dict(self.model_kwargs or {})
        return TracedFamily(self.model, kwargs)

    _occam = False  # a user's program: its likelihood's information and its prior are its own

    def _pruning_precision(self):
        return self.pruning_precision if self._takes("prior_precision") else None

    def _log_prior(self, means, sticks, variances, **settings):
        """The program's own ln p(mu) + ln p(v) at the point estimates, plus the logit Jacobian of
        the MAP guide (clusters removed by pruning are not counted: the program does not know them)."""
        conditioned = pyro.poutine.condition(self.model, data={"v": sticks, "mu": means})
        kwargs = dict(self._session.model_kwargs, truncation=means.shape[0])  # the phase's prior
        trace = pyro.poutine.trace(pyro.poutine.block(conditioned, hide=["z", "x"])).get_trace(means[:1], **kwargs)
        prior = sum(trace.nodes[name]["fn"].log_prob(trace.nodes[name]["value"]).sum() for name in ("v", "mu"))
        return prior + (sticks.log() + torch.log1p(-sticks)).sum()

    def _check_program(self, x):
        """A clear error for a program that breaks the contract, before any learning starts."""
        x = x[:2]
        try:
            trace = pyro.poutine.trace(pyro.infer.config_enumerate(self.model)).get_trace(
                x, truncation=max(2, min(self.truncation, 3)), **(self.model_kwargs or {}))
        except Exception as err:
            raise ValueError(f"the program failed on a batch of X: {type(err).__name__}: {err}") from None
        latent = {name for name, site in trace.nodes.items() if site["type"] == "sample" and not site["is_observed"]
                  and not pyro.poutine.util.site_is_subsample(site)}
        missing = {"v", "mu", "z"} - latent
        extra = latent - {"v", "mu", "z"}
        if missing or "x" not in trace.nodes or not trace.nodes["x"]["is_observed"]:
            raise ValueError(f"the program must have latent sites v, mu, z and an observed x; missing "
                             f"{sorted(missing) or 'the observed x'}")
        if extra:
            raise ValueError(f"MixtureSVI's guides cover the sites v and mu; the program has further latent "
                             f"sites {sorted(extra)}: give them fixed values through model_kwargs")
