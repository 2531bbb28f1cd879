"""The contract of a conjugate component family, and the prior every Gaussian family shares.

A family's variational factor q(theta_k) is conjugate: its natural parameters are the prior's plus
the cluster's sufficient statistics, which add over rows, minibatches and ranks. Everything a
learner needs follows from four methods:

    statistics(x, weights, prior)  the K clusters' sums, a dict of tensors with K leading
    natural(stats, prior)          q's natural parameters: the prior's plus the statistics
    expected_log_density(x, q, prior)   E_q ln f(x_n | theta_k), (N, K): the assignments' scores
    kl(q, prior)                   KL(q(theta_k) || p(theta_k)), (K,): the bound's component term

so that batch VMM/VB (``inference.stick_mixture.vmm``) is: scores -> assignments -> statistics -> natural, and
natural-gradient SVI ([PYPM-sVMM] eq. (10)) moves the natural parameters toward ``natural`` of a
minibatch's statistics scaled to N. A family that learns a spread also gives
``expected_data_term(q, stats, prior)``, sum_n w_nk E_q ln f(x_n | theta_k) from the statistics
alone (the memoized bound of merge moves, ``inference.stick_mixture.vmm``). ``point(q, prior)``
gives the fitted point estimates (the means and the expected precision) that ``log_density``
scores for prediction, and ``valid(q)`` which factors are proper (K,): the stochastic learners
whose steps are not convex combinations of natural parameters check it after every step
(``inference.stick_mixture.session``).

Rows are centred on the prior's mean m0 (the data's mean) before any sum is taken: the scatter
sum_n x_n x_n^T of data far from zero would otherwise cancel against N m m^T in float32.
"""

from dataclasses import dataclass, replace

import pyro
import torch

from bnpzoo.families.contract import Capabilities


@dataclass(frozen=True)
class ComponentPrior:
    """The prior of a cluster's location and spread, in the units of the data.

    mean : m0 (D,), where every location's prior is centred (the data's mean by default).
    mean_precision : kappa0 (lambda0 of the papers): the location's prior is worth kappa0 samples.
    covariance : Sigma0 (D, D), the spread expected of a cluster; the fixed-scale family's
        component covariance itself, diag(std^2).
    dof : nu0, how many samples Sigma0 is worth (the Wishart's degrees of freedom; the Gamma's shape
        is nu0 / 2 per feature).
    """

    mean: torch.Tensor
    mean_precision: float
    covariance: torch.Tensor
    dof: float = 0.0

    def with_mean_precision(self, value: float) -> "ComponentPrior":
        """The same prior with another kappa0 (the learners' pruning phase)."""
        return replace(self, mean_precision=float(value))

    @property
    def std(self) -> torch.Tensor:
        """The per-feature standard deviation sqrt(diag Sigma0), (D,)."""
        return self.covariance.diagonal().sqrt()


class ConjugateFamily:
    """Base of the conjugate families (the module docstring). A subclass gives ``name``, the
    statistics it needs beyond the count and the sum (``_second_moments``), ``natural`` and its
    conversion to ``point``, ``log_density``, ``correction`` and ``kl``."""

    name = "conjugate"
    # each cluster's spread is learned (its point estimate beside the mean), and merges close what
    # K-means split (``families.contract``)
    capabilities = Capabilities(frozenset({"vmm", "natural", "evidence"}), moves=True, spread_prior=True,
                                base_measure=True)
    # kappa0 of the learners' pruning phase (``inference.stick_mixture.vmm``): none for a learned spread, whose
    # merge moves close the clusters K-means split off (on three blobs of 200 rows a phase at 20 left
    # a fourth cluster of 2 outlying rows, at a bound 3 nats lower than without it)
    pruning_precision = 0.0

    def statistics(self, x: torch.Tensor, weights: torch.Tensor, prior: ComponentPrior, factors=None) -> dict:
        """N_k = sum_n w_nk, S_k = sum_n w_nk (x_n - m0) and the family's second moments, for
        weights (N, K) (responsibilities or one-hot rows): matrix products in the data's precision,
        returned in float64, so that sums over blocks, minibatches and ranks keep their digits.
        ``factors``: the q that scored the weights, for a family whose statistics are taken around
        it (``families.learned_scale``); the conjugate families' are not."""
        xc = x - prior.mean
        stats = {"count": weights.sum(0), "sum": weights.T @ xc, **self._second_moments(xc, weights)}
        return {name: value.double() for name, value in stats.items()}

    def label_statistics(self, x: torch.Tensor, labels: torch.Tensor, k: int, prior: ComponentPrior,
                         factors=None) -> dict:
        """``statistics`` of one-hot weights from ``labels`` (-1: in no cluster), by index sums."""
        xc = (x - prior.mean).double()
        index = labels % (k + 1)  # entry k collects the -1s
        count = torch.bincount(index, minlength=k + 1).double()
        total = xc.new_zeros(k + 1, xc.shape[1]).index_add_(0, index, xc)
        stats = {"count": count[:k], "sum": total[:k]}
        for name, value in self._label_second_moments(xc, index, count).items():
            stats[name] = value[:k]
        return stats

    def _second_moments(self, xc, w) -> dict:
        return {}

    def _label_second_moments(self, xc, index, count) -> dict:
        """The second moments of rows ``xc`` by cluster ``index`` (``count`` rows each)."""
        return {}

    birth_pieces = (2,)  # the numbers of pieces a birth move proposes to divide a cluster into, in turn

    def rows_term(self, x: torch.Tensor, prior: ComponentPrior) -> float:
        """What ``expected_data_term`` leaves out, summed over the rows of x (the same for every
        assignment of them): 0 where it leaves out nothing."""
        return 0.0

    def split_views(self, rows: torch.Tensor, prior: ComponentPrior):
        """A cluster's ``rows`` in each of the coordinates a split move divides them in, in turn (a
        generator of linear maps of the rows, so centring commutes with them): each feature in units
        of its own spread; the family's own (``_own_views``); then in the units of the prior's spread
        sqrt(diag Sigma0), where a cluster holding a row of smaller ones is cut along the row: in its
        own units the row's long axis shrinks below the noise across it (a column of five clusters 8
        sds apart: spacing 0.7, noise 1), and no division into 2 to 8 pieces paid."""
        yield rows / rows.std(0).clamp_min(torch.finfo(rows.dtype).tiny ** 0.5)
        yield from self._own_views(rows, prior)
        yield rows / prior.std.to(rows).clamp_min(torch.finfo(rows.dtype).tiny ** 0.5)

    def _own_views(self, rows: torch.Tensor, prior: ComponentPrior):
        """A family's further coordinates of ``split_views`` (none by default)."""
        return iter(())

    def expected_log_density(self, x: torch.Tensor, q: dict, prior: ComponentPrior, point=None,
                             log_weights=0.0) -> torch.Tensor:
        """ln pi_k + E_q ln f(x_n | theta_k), (N, K): ln f at q's point estimate (``point``, when the
        caller holds it already) plus ``correction`` (what the expectation adds, one number per
        cluster) and the clusters' ``log_weights`` (none by default)."""
        point = self.point(q, prior) if point is None else point
        return self.log_density(x, point) + (self.correction(q).to(x.dtype) + log_weights)

    def mean_scale(self, point: dict, counts: torch.Tensor, prior_precision: float) -> torch.Tensor:
        """The conjugate factor's spread of each mean, sqrt(Sigma_k / (N_k + kappa0)) per feature, (K, D)."""
        return (self.variances(point) / (counts[:, None] + prior_precision)).sqrt()

    @staticmethod
    def location_information(std) -> torch.Tensor:
        """Fisher information of a Gaussian location per feature at standard deviation ``std``, 1 / std^2
        (the unit of the session's steps)."""
        return 1 / torch.as_tensor(std) ** 2

    def sample_factor(self, q: dict, prior: ComponentPrior) -> None:
        """Sample the program's cluster sites from the factors q, under the ``"clusters"`` plate (the
        mean-field guide of natural-gradient SVI)."""
        raise NotImplementedError

    def draw(self, q: dict, prior: ComponentPrior) -> dict:
        """One draw of every cluster's parameters from the factors q (the exact posterior where q is
        ``natural(stats)``), as the point that ``log_density`` scores: ``sample_factor``'s sites, read
        by ``point_of_sites``. Torch's generator draws them."""
        trace = pyro.poutine.trace(self.sample_factor).get_trace(q, prior)
        sites = {name: site["value"] for name, site in trace.nodes.items() if site["type"] == "sample"}
        return self.point_of_sites(sites, prior)

    def point_of_sites(self, sites: dict, prior: ComponentPrior) -> dict:
        """The point ``log_density`` scores at the program's cluster sites ``sites`` (``mu``, ...)."""
        raise NotImplementedError

    def log_evidence(self, stats: dict, prior: ComponentPrior) -> torch.Tensor:
        """ln p(x_k) of each cluster's rows with theta_k integrated out, (K,), less ``rows_term`` (the
        same for every partition of the rows): the bound E_q ln f(x_k | theta) - KL(q || p) at the
        exact posterior q = ``natural(stats)``, where it is tight. What the sampler's moves score
        (``inference.stick_mixture.split_merge``)."""
        q = self.natural(stats, prior)
        return self.expected_data_term(q, stats, prior) - self.kl(q, prior)

    @staticmethod
    def add(first: dict, second: dict) -> dict:
        """Statistics of the union of two sets of rows."""
        return {name: first[name] + second[name] for name in first}
