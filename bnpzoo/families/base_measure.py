"""A base measure that learns its scale: the Gaussian families' prior fitted with the clusters.

The conjugate prior of a cluster (``base.ComponentPrior``) ties a mean to its own precision,
mu_k | Lambda_k ~ N(m0, (kappa0 Lambda_k)^-1), and guesses every cluster's spread, E[Lambda_k] =
Sigma0^-1. Held at kappa0 = 1 and Sigma0 = the data's covariance over 4, it made the posterior prefer
merged clusters wherever they are many and small: a tight cluster far from the data's centre pays
kappa0 / 2 (mu_k - m0)^T Lambda_k (mu_k - m0) for its mean (hundreds of nats at 20 cluster sds), and
the Wishart's tr(W0^-1 Lambda_k) / 2 for being tighter than a guess as broad as the data
(Goeruer and Rasmussen 2010 on that coupling; Rasmussen 2000 on base measures that follow the data).

Type-II maximum likelihood (empirical Bayes) of (kappa0, Sigma0) inside the variational bound. The
bound's only terms in the prior are -sum_k KL(q(theta_k) || p(theta_k | kappa0, Sigma0)), that is
sum_k E_q ln p(mu_k, Lambda_k | kappa0, Sigma0) plus q's entropy, and with W0^-1 = nu0 Sigma0

    E_q ln p(mu_k | Lambda_k) = D/2 ln kappa0 - kappa0 / 2 E_q[(mu_k - m0)^T Lambda_k (mu_k - m0)] + c
                              = D/2 ln kappa0 - kappa0 / 2 (D / kappa_k + (m_k - m0)^T E[Lambda_k] (m_k - m0)) + c
    E_q ln p(Lambda_k)        = nu0/2 ln|Sigma0| - nu0/2 tr(Sigma0 E[Lambda_k]) + c

(E[(mu - m)(mu - m)^T | Lambda] = (kappa_k Lambda)^-1 gives D / kappa_k). Both are concave in their
argument (kappa0; Sigma0^-1), and their maxima over the K clusters are closed:

    kappa0 = K D / sum_k (D / kappa_k + (m_k - m0)^T E[Lambda_k] (m_k - m0)),   at most ``most_precision``
    Sigma0^-1 = 1/K sum_k E[Lambda_k]                                           (the clusters' mean precision)

the same per feature for the Normal-Gamma (Sigma0 = diag(1 / mean_k E[tau_kd])) and pooled over
features for the spherical family (the Gamma's rate b0 = a0 / mean_k E[tau_k]). Each update
maximises the bound over the prior given q (the next step maximises over q given the prior), so
the objective still never decreases. The bound on kappa0 (``prior_precision``, 1 by default) keeps a
single cluster whose mean sits at m0 from sending kappa0 to infinity; it is a constrained maximum
of a concave function, min(bound, kappa0*), and keeps the monotone ascent.

A family offers this through ``base_measure_moments`` (its capability ``base_measure``): the K
clusters' expected precisions and expected Mahalanobis spreads of their means.
"""

from dataclasses import dataclass, replace

import torch

from bnpzoo.families.base import ComponentPrior


def learned_prior(moments, prior: ComponentPrior, most_precision: float, spread: bool) -> ComponentPrior:
    """The prior that maximises the bound given the clusters' factors (the module docstring), from
    ``moments`` = (E[Lambda_k] (K, D, D), or (K, D) for a diagonal family; E_q[(mu_k - m0)^T Lambda_k
    (mu_k - m0)] (K,)); Sigma0 only with ``spread``."""
    precisions, mahalanobis = moments
    k, d = mahalanobis.numel(), prior.mean.numel()
    if k == 0:
        return prior
    mean_precision = min(float(most_precision), k * d / float(mahalanobis.sum()))
    learned = {"mean_precision": mean_precision}
    if spread:
        average = precisions.mean(0)
        covariance = torch.linalg.inv(average) if average.ndim == 2 else torch.diag(1 / average)
        learned["covariance"] = covariance.to(prior.covariance)
    return replace(prior, **learned)


@dataclass(frozen=True)
class BaseMeasure:
    """How a fit learns its base measure: kappa0 up to ``most_precision`` at every step, Sigma0 from
    the first step (``spread_from_start``) or once the fit has settled under the guess it was given.

    Both schedules are needed, as two starts of one fit whose better bound is kept
    (``inference.stick_mixture.vmm.fit_vmm``): from a K-means start of ``truncation`` cells, Sigma0
    learned at once takes the cells' own size, and cells of one large cluster then stay apart (three
    1-D clusters of 33,000 rows: 7 to 32 clusters, every one a bound 100 to 450 nats below the three
    found by the other schedule); learned after settling under the broad guess, it follows clusters
    merged already, and many small clusters stay merged (43 clusters of 62 rows in 2-D: 15 clusters,
    430 nats below the 31 of the other schedule)."""

    most_precision: float = 1.0
    spread_from_start: bool = True

    def schedules(self) -> tuple:
        """The two starts of a fit: Sigma0 learned once settled, then from the start."""
        return (replace(self, spread_from_start=False), replace(self, spread_from_start=True))
