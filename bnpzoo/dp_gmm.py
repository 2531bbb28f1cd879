"""``bnpzoo.DPGMM``: the DP mixture of Gaussians ([DPM-SGA]) behind a scikit-learn face.

The one place that pairs ``models.dp_gmm`` with its family and the learners of the shared core
(``bnpzoo.mixture``).
"""

from bnpzoo._validation import Interval, OneOf, Scale
from bnpzoo.families import GeneralizedGaussianFamily
from bnpzoo.mixture import COMMON_CONSTRAINTS, INFERENCE, SHARED_PARAMETERS, StickMixture
from bnpzoo.models.dp_gmm import model as dp_gmm_model


class DPGMM(StickMixture):
    """Dirichlet-process mixture of Gaussians with a shared, fixed diagonal variance sigma^2.

    Parameters (keyword-only)
    ----------
    truncation : int, K, the most clusters the fit can use.
    inference : "vmm" (batch closed-form MM, [DPM-SGA] eq. (5), (15)); "vi" (Pyro SVI with Adam);
        or a paper's learner on minibatches under Pyro SVI (``inference.optim``): "sga", "sga-momentum",
        "sga-fisher" ([DPM-SGA] eq. (6)-(9), (16)), "svmm", "svmm-mgrad", "svmm-grad" ([PYPM-sVMM]
        eq. (11), (13), (14) and its ablations), "natgrad-svi" (conjugate SVI, [PYPM-sVMM] Table I).
    alpha : a0 of the Beta(1, a0) sticks.
    sigma : the component standard deviation: one number, one per feature, or None for the
        data-driven default of ``bnpzoo.mixture`` (``bnpzoo.ops.default_sigma`` times
        ``relative_spreads``), which keeps the likelihood from drowning the stick-breaking prior
        without merging well-separated clusters, and features in large units from drowning the
        others.
    """

    _parameter_constraints = {
        "inference": OneOf(*INFERENCE),
        "alpha": Interval(float, 0, low_open=True),
        "sigma": Scale(),
        **COMMON_CONSTRAINTS,
    }

    def __init__(self, *, truncation=50, inference="vmm", alpha=1.0, sigma=None, prior_precision=1.0,
                 pruning_precision=None, split_moves=False, assignment=None, guide="map", max_iter=500, tol=1e-5,
                 prune_threshold=1e-3, batch_size=None, learning_rate=None, n_init=3, device=None, dtype="float32",
                 random_state=None, verbose=False, data_parallel=False):
        self._store(locals())

    @property
    def sigma_(self):
        """The component standard deviation per feature (``scale_``)."""
        return self.scale_

    def _program(self):
        return dp_gmm_model

    def _family(self):
        return GeneralizedGaussianFamily(2.0)

    def _stick_prior(self) -> dict:
        return dict(alpha=self.alpha, discount=0.0)

    def _given_scale(self):
        return self.sigma

    def _program_kwargs(self, std, prior_mean) -> dict:
        return dict(alpha=self.alpha, sigma=std, prior_mean=prior_mean, prior_precision=self.prior_precision)


DPGMM.__doc__ += SHARED_PARAMETERS
