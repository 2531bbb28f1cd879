"""Which Gaussian component family a stick mixture fits: the ``covariance`` argument of ``DPGMM``
and of ``PYPGGM`` at rho = 2, and the rule its default follows.

A mixin of ``bnpzoo.mixture.StickMixture``: the estimator gives ``_rho()`` (the generalized
Gaussian's shape; 2 for the Gaussian) and ``_given_scale()``; a learned covariance needs rho = 2
(the Normal-Wishart and Normal-Gamma families are the Gaussian's conjugate priors).
"""

from bnpzoo.families import GeneralizedGaussianFamily, LearnedScaleFamily, gaussian_family
from bnpzoo.mixture import FITTED

FULL_FEATURES = 32  # the most features for which the default covariance is "full" ("diag" above)


class LearnedCovariance:
    """The ``covariance`` argument, its default rule and the family it selects (the module
    docstring)."""

    _fitted_attributes = FITTED + ("covariance_type_",)

    def _rho(self) -> float:
        return 2.0

    def _covariance_type(self, n_samples=None, n_features=None) -> str:
        """``covariance``, or what None resolves to: "full" when no scale is given (nor a stochastic learner's
        data-parallel fit) and the data hold at least 5 samples per parameter of a cluster's covariance (N >= 5
        D (D + 1) / 2), else "fixed". On scikit-learn's digits (1,797 x 64: 2,080 parameters a cluster) "full"
        gave NMI 0.33 and "fixed" 0.74; the five real tables of ``reports/families.md`` (4 to 9 features) all
        pass the test but glass (214 x 9), where "diag" was best. Above ``FULL_FEATURES`` features, "diag": on
        100,000 x 64 round blobs (50 of 2,000 rows, 10 sd apart) the full covariance's prior (then the data's
        covariance whole, worth D = 64 samples) outweighs a cluster's own rows, and the bound ranks 7 clusters
        above the true 50 (the stochastic learners, opening clusters by births, stopped at 14, NMI 0.67; vmm
        kept its start's 50 in 9.6 s); "diag" found the 50 with every learner (vmm 2.0 s). Not lower: "diag" cut
        one correlated 10-D cloud into 12 clusters. Between 10 and 32 features round well-separated blobs still
        under-split with the stochastic learners (20,000 x 16, 20 blobs: 11 clusters), where clusters with
        random covariances were all found (``benchmarks/reports/shapes.md``). At 1 <= rho < 2 (no scale given),
        "diag", a generalized-Gaussian scale learned per cluster and feature (``families.learned_scale``), up to
        ``FULL_FEATURES`` features, else "fixed"; "fixed" at rho > 2. Against the fixed Laplace under svmm
        (``benchmarks/reports/pyp_ggm.md``, random_state 0 to 2): heavy-tailed clusters of unequal scales
        (Laplace and Student-t noise, 6 draws) NMI 0.952 to 0.987 against 0.873 to 0.940, DAAG's leafshape 0.137
        against 0.100, the paper's Laplace blobs of one scale 0.946 and 0.901 against 0.946 and 0.902, and 13 of
        19 sets won in all; on digits (64 features) 0.031 (2 clusters) against 0.672, hence the bound on the
        features."""
        if self.covariance is not None:
            return self.covariance
        stochastic_data_parallel = self.data_parallel and self._learner().svi
        if self._given_scale() is not None or stochastic_data_parallel or self._rho() > 2.0:
            return "fixed"
        if self._rho() != 2.0:  # a generalized Gaussian: its scale learned per cluster and feature, or fixed
            return "fixed" if n_features is not None and n_features > FULL_FEATURES else "diag"
        if n_samples is not None and n_samples < 5 * n_features * (n_features + 1) / 2:
            return "fixed"
        return "full" if n_features is None or n_features <= FULL_FEATURES else "diag"

    def _resolve(self, x) -> None:
        self.covariance_type_ = self._covariance_type(*x.shape)

    def _family(self):
        fitted = getattr(self, "covariance_type_", None)
        covariance = fitted if fitted is not None else self._covariance_type()
        if covariance == "fixed":
            return GeneralizedGaussianFamily(self._rho())
        return gaussian_family(covariance) if self._rho() == 2.0 else LearnedScaleFamily(self._rho())

    def _validate_params(self):
        super()._validate_params()
        rho = self._rho()
        if self.covariance not in (None, "fixed", "diag") and rho != 2.0:
            raise ValueError(f"covariance={self.covariance!r} is learned for the Gaussian (rho = 2) only, not rho = "
                             f"{rho:g}; use likelihood='gaussian', covariance='diag' (a scale per cluster and "
                             "feature) or covariance='fixed'")
        if self.covariance == "diag" and rho > 2.0:
            raise ValueError(f"covariance='diag' (a learned scale) needs 1 <= rho <= 2, got rho={rho:g}; use "
                             "covariance='fixed'")
