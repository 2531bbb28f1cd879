"""Component families of the stick-breaking mixtures: one file each.

A family owns a cluster's parameters and their conjugate prior (``base.ComponentPrior``): it gives
the N x K table of component log-densities at point estimates (``log_density``, used by
prediction, ArviZ and every learner), and what it offers the learners (``capabilities``, a
``contract.Capabilities``; ``contract`` writes the methods down as Protocols), among them the
closed forms it has:

    "vmm"      batch closed-form updates: statistics -> natural parameters (``base.ConjugateFamily``)
    "natural"  the conjugate natural-gradient estimate ([PYPM-sVMM] eq. (10), Table I)
    "fisher"   the per-sample Fisher of SGA+F ([DPM-SGA] eq. (8), (9), (16))

=============================  ==================  =========================================
family                         ``covariance``      learned per cluster
=============================  ==================  =========================================
``NormalWishartFamily``        ``"full"``          mean and full covariance
``NormalGammaFamily()``        ``"diag"``          mean and one variance per feature
``NormalGammaFamily(True)``    ``"spherical"``     mean and one variance
``GeneralizedGaussianFamily``  ``"fixed"``         mean (a shared, fixed std per feature)
``LearnedScaleFamily(rho)``    ``"diag"``          mean and a GGD scale per feature, 1 <= rho <= 2
``BetaBernoulliFamily``        (binary features)   a probability per feature (Beta prior)
``TracedFamily``               (a user's program)  what the program's guide fits
=============================  ==================  =========================================
"""

from bnpzoo.families.base import ComponentPrior, ConjugateFamily
from bnpzoo.families.base_measure import BaseMeasure
from bnpzoo.families.contract import Capabilities, ComponentFamily, checked
from bnpzoo.families.beta_bernoulli import BetaBernoulliFamily
from bnpzoo.families.generalized_gaussian import GeneralizedGaussianFamily
from bnpzoo.families.learned_scale import LearnedScaleFamily
from bnpzoo.families.normal_gamma import NormalGammaFamily
from bnpzoo.families.normal_wishart import NormalWishartFamily
from bnpzoo.families.traced import TracedFamily

COVARIANCES = ("full", "diag", "spherical", "fixed")


def gaussian_family(covariance: str):
    """The Gaussian family of a ``covariance`` in ``COVARIANCES``."""
    return {"full": NormalWishartFamily, "diag": NormalGammaFamily, "spherical": lambda: NormalGammaFamily(True),
            "fixed": lambda: GeneralizedGaussianFamily(2.0)}[covariance]()


__all__ = ["BaseMeasure", "BetaBernoulliFamily", "COVARIANCES", "Capabilities", "ComponentFamily", "ComponentPrior",
           "ConjugateFamily", "GeneralizedGaussianFamily", "LearnedScaleFamily", "NormalGammaFamily",
           "NormalWishartFamily", "TracedFamily", "checked", "gaussian_family"]
