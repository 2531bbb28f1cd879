"""``bnpzoo.DPGMM``: the DP mixture of Gaussians ([DPM-SGA]) behind a scikit-learn face.

The one place that pairs ``models.dp_gmm`` with its family and the learners of the shared core
(``bnpzoo.mixture``).
"""

from bnpzoo._validation import Interval, OneOf, Scale
from bnpzoo.families import COVARIANCES
from bnpzoo.gaussian_components import LearnedCovariance
from bnpzoo.mixture import COMMON_CONSTRAINTS, INFERENCE, StickMixture, documented
from bnpzoo.models.dp_gmm import model as dp_gmm_model


@documented
class DPGMM(LearnedCovariance, StickMixture):
    """Dirichlet-process mixture of Gaussians, each cluster with its own covariance (by default) or
    all with one fixed diagonal variance sigma^2 (the model of [DPM-SGA]).

    Parameters (keyword-only)
    ----------
    truncation : int, K, the most clusters the fit can use.
    inference : "vmm" (batch closed-form MM, [DPM-SGA] eq. (5), (15)); "vi" (Pyro SVI with Adam);
        or a paper's learner on minibatches under Pyro SVI (``inference.optim``): "sga", "sga-momentum",
        "sga-fisher" ([DPM-SGA] eq. (6)-(9), (16)), "svmm", "svmm-mgrad", "svmm-grad" ([PYPM-sVMM]
        eq. (11), (13), (14) and its ablations), "natgrad-svi" (conjugate SVI, [PYPM-sVMM] Table I);
        "gibbs": posterior samples, chains of exact split-merge moves over the partition
        (``inference.stick_mixture.sampler``; ``samples_``, ``coclustering_``, ``to_arviz()``).
    alpha : a0 of the Beta(1, a0) sticks.
    covariance : the component family (``bnpzoo.families``): "full" (a covariance per cluster,
        Normal-Wishart prior), "diag" (a variance per cluster and feature, Normal-Gamma), "spherical"
        (one variance per cluster) or "fixed" (one std per feature shared by every cluster and not
        learned: the papers' model). None: "full" when no scale is given and N >= 5 D (D + 1) / 2
        ("diag" above 32 features), else "fixed" (``gaussian_components``; the fitted choice is
        ``covariance_type_``); "fixed" for the stochastic learners' data-parallel fits, whose births
        and merges need one process. Every
        learner fits every family: vmm by closed-form updates, the stochastic learners through the
        family's conjugate factors (``inference.stick_mixture.session``); with a learned covariance
        all take soft assignments, births and merge moves. Measured on one Gaussian cloud (500 x 2,
        2,000 x 10), two blobs of spreads 0.1 and 5, three 1-D clusters of 30,000 rows and clusters
        with random covariances in 10-D, "full" found the true number of clusters in every case, where
        "fixed" cut one cloud into 7 (``benchmarks/reports/families.md``); the stochastic learners
        likewise (``benchmarks/reports/shapes.md``).
    scale : with covariance="fixed", the component standard deviation: one number, one per feature,
        or None for the data-driven default of ``bnpzoo.mixture`` (``bnpzoo.ops.default_sigma``
        times ``relative_spreads``), which keeps the likelihood from drowning the stick-breaking
        prior without merging well-separated clusters, and features in large units from drowning
        the others. With a learned covariance, the prior's guess of a cluster's spread (Sigma0 =
        diag(scale^2), worth D samples); by default the data's covariance over 4
        (``StickMixture._component_prior``, ``benchmarks/reports/priors.md``); the guess a learned base
        measure starts from (``base_measure="fixed"`` holds it). The name of
        ``PYPGGM`` and of the fitted ``scale_``.
    sigma : the old name of ``scale`` (a FutureWarning; removed in the next release).
    """

    _parameter_constraints = {
        "inference": OneOf(*INFERENCE),
        "alpha": Interval(float, 0, low_open=True),
        "covariance": OneOf(*COVARIANCES, None),
        "scale": Scale(),
        "base_measure": OneOf("learned", "fixed"),
        **COMMON_CONSTRAINTS,
        "sigma": Scale(),
    }
    _renamed = {"sigma": "scale"}

    def __init__(self, *, truncation=50, inference="vmm", alpha=1.0, covariance=None, scale=None, prior_precision=1.0,
                 base_measure="learned", pruning_precision=None, split_moves=None, assignment=None, guide="map",
                 max_iter=None, tol=1e-5, prune_threshold=1e-3, batch_size=None, learning_rate=None, n_init=3,
                 device=None, dtype="float32", random_state=None, verbose=False, data_parallel=False, num_chains=None,
                 warmup=None, checkpoint=None, checkpoint_every=50, sigma=None):
        self._store(locals())

    @property
    def sigma_(self):
        """The component standard deviation per feature (``scale_``)."""
        return self.scale_

    def _program(self):
        return dp_gmm_model

    def _stick_prior(self) -> dict:
        return dict(alpha=self.alpha, discount=0.0)

    def _given_scale(self):
        return self._param("scale")

    def _program_kwargs(self, std, prior_mean) -> dict:
        return dict(alpha=self.alpha, covariance=self._family().covariance, sigma=std, prior_mean=prior_mean,
                    prior_precision=self.prior_precision)

