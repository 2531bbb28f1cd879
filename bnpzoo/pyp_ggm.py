"""``bnpzoo.PYPGGM``: the Pitman-Yor process mixture of generalized Gaussians ([PYPM-sVMM]) behind a
scikit-learn face.

The one place that pairs ``models.pyp_ggm`` with its family and the learners of the shared core
(``bnpzoo.mixture``).
"""

from bnpzoo._validation import Interval, OneOf, Scale
from bnpzoo.families import GeneralizedGaussianFamily
from bnpzoo.mixture import COMMON_CONSTRAINTS, INFERENCE, SHARED_PARAMETERS, StickMixture
from bnpzoo.models.pyp_ggm import model as pyp_ggm_model

LIKELIHOODS = {"gaussian": 2.0, "laplace": 1.0}


class PYPGGM(StickMixture):
    """Pitman-Yor process mixture of generalized Gaussians, GGD(x | B, s, rho) per feature with s
    and rho fixed ([PYPM-sVMM] eq. (1)-(3)); the means' posterior is conjugate only at rho = 2.

    Parameters (keyword-only)
    ----------
    truncation : int, K, the most clusters the fit can use.
    inference : "svmm" ([PYPM-sVMM] Algorithm 2: sVMM steps for the means, eq. (14), (19), MAP
        assignments, eq. (20), closed-form sticks, eq. (21), pruning, V.D); its ablations
        "svmm-mgrad" and "svmm-grad" (section VI.C); the other gradient learners "sga",
        "sga-momentum", "vi"; and, for the Gaussian (rho = 2) only, "vmm" (batch closed form),
        "natgrad-svi" ("SVI: DPM", Table I) and "sga-fisher".
    likelihood : "laplace" (rho = 1, the paper's best) or "gaussian" (rho = 2); ignored when rho
        is given.
    rho : the GGD shape, any number >= 1 (None: from ``likelihood``). Larger is lighter-tailed.
    discount : d of the Pitman-Yor sticks Beta(1 - d, alpha + k d), 0 <= d < 1; 0 is the Dirichlet
        process. A positive d expects many small clusters, with sizes following a power law.
    alpha : alpha0 of the sticks, > -discount.
    scale : each feature's standard deviation within a cluster (not the s of eq. (2): s =
        scale sqrt(Gamma(1/rho) / Gamma(3/rho)), so a scale means the same for every rho): one
        number, one per feature, or None for the data-driven default of ``bnpzoo.mixture``.
    """

    _parameter_constraints = {
        "inference": OneOf(*INFERENCE),
        "likelihood": OneOf(*LIKELIHOODS),
        "rho": Interval(float, 1, optional=True),
        "discount": Interval(float, 0, 1, high_open=True),
        "alpha": Interval(float),
        "scale": Scale(),
        **COMMON_CONSTRAINTS,
    }

    def __init__(self, *, truncation=50, inference="svmm", likelihood="laplace", rho=None, discount=0.0, alpha=1.0,
                 scale=None, prior_precision=1.0, pruning_precision=None, split_moves=None, assignment=None,
                 guide="map", max_iter=500, tol=1e-5, prune_threshold=1e-3, batch_size=None, learning_rate=None,
                 n_init=3, device=None, dtype="float32", random_state=None, verbose=False, data_parallel=False):
        self._store(locals())

    @property
    def rho_(self) -> float:
        return float(self.rho) if self.rho is not None else LIKELIHOODS[self.likelihood]

    def _program(self):
        return pyp_ggm_model

    def _family(self):
        return GeneralizedGaussianFamily(self.rho_)

    def _stick_prior(self) -> dict:
        return dict(alpha=self.alpha, discount=self.discount)

    def _given_scale(self):
        return self.scale

    def _program_kwargs(self, std, prior_mean) -> dict:
        return dict(alpha=self.alpha, discount=self.discount, scale=std, rho=self.rho_, prior_mean=prior_mean,
                    prior_precision=self.prior_precision)


PYPGGM.__doc__ += SHARED_PARAMETERS
