"""The family contract: what the learners call on a component family (``ComponentFamily``, with
``ConjugateComponents`` and ``MovingComponents`` for what a capability adds) and what it offers them
(``Capabilities``), checked once where an estimator begins a fit (``checked``).

A family's capabilities, each a decision the learners take from it:

    closed_forms  "vmm" (batch closed-form updates), "natural" (the conjugate natural-gradient
                  estimate), "fisher" (SGA+F's per-sample Fisher), "evidence" (a cluster's marginal
                  likelihood and draws from its exact posterior: the sampler): which learners can fit it
    moves         how the clusters K-means made too many (or too few) are closed and opened: True,
                  by births and merges judged on memoized statistics, from a start of a few clusters,
                  with soft assignments, every learner (vi too) on the conjugate factors whose record
                  the moves read; False, by a pruning phase under a stronger prior on the means, from
                  ``truncation`` clusters, with the papers' MAP assignments, and births only
    spread_prior  the prior's Sigma0 is a guess of the clusters' own spreads, which the fit learns
                  (the data's covariance over 4 by default, ``StickMixture._component_prior``); False:
                  it is the fixed component scale itself, or the family has no spread
    base_measure  the prior's kappa0 and Sigma0 are learned with the clusters (``families.base_measure``,
                  type-II maximum likelihood in the bound): the family gives ``base_measure_moments``
    soft          the learners' default assignments: responsibilities (True) or MAP ones (False);
                  None, soft exactly where the family has moves (hard VB cuts overlapping clusters
                  apart; the fixed scale keeps the papers' MAP assignments)

Before this record, one flag (``learns_spread``) stood for all of ``moves`` and ``spread_prior``.
"""

from dataclasses import dataclass
from typing import Protocol

import torch

CLOSED_FORMS = frozenset({"vmm", "natural", "fisher", "evidence"})


@dataclass(frozen=True)
class Capabilities:
    closed_forms: frozenset = frozenset()
    moves: bool = False
    spread_prior: bool = False
    base_measure: bool = False
    soft: bool | None = None

    @property
    def soft_assignments(self) -> bool:
        """``soft``, or what None resolves to."""
        return self.moves if self.soft is None else self.soft


class ComponentFamily(Protocol):
    """What every learner and the fitted estimator call (a user's program's ``TracedFamily`` too)."""

    name: str
    covariance: str | None  # the estimator's ``covariance_type_``
    capabilities: Capabilities

    def log_density(self, x: torch.Tensor, point: dict) -> torch.Tensor:
        """ln f(x_n | point_k), (N, K), at point estimates: prediction, ArviZ, every learner."""

    def location_information(self, std) -> torch.Tensor:
        """The Fisher information of a location per feature at scale ``std``: the steps' unit."""

    def covariances(self, point: dict) -> torch.Tensor:
        """The clusters' covariances in scikit-learn's shapes (``covariances_``)."""

    def mean_scale(self, point: dict, counts: torch.Tensor, prior_precision: float) -> torch.Tensor:
        """(K, D) the posterior standard deviation of each cluster's mean at the fitted ``point``, the
        clusters holding ``counts`` rows (``mean_scale_``, which ``to_arviz`` draws from)."""


class ConjugateComponents(ComponentFamily, Protocol):
    """What a family with the closed forms "vmm" or "natural" adds (``families.base``)."""

    def statistics(self, x, weights, prior, factors=None) -> dict: ...
    def label_statistics(self, x, labels, k, prior, factors=None) -> dict: ...
    def natural(self, stats, prior) -> dict: ...
    def point(self, q, prior) -> dict: ...
    def expected_log_density(self, x, q, prior, point=None, log_weights=0.0) -> torch.Tensor: ...
    def kl(self, q, prior) -> torch.Tensor: ...
    def valid(self, q) -> torch.Tensor: ...
    def counts(self, q, prior) -> torch.Tensor: ...
    def add(self, first, second) -> dict: ...


class MovingComponents(ConjugateComponents, Protocol):
    """What ``moves`` adds: a cluster's data term from its statistics alone, and the proposals."""

    birth_pieces: tuple

    def expected_data_term(self, q, stats, prior) -> torch.Tensor: ...
    def rows_term(self, x, prior) -> float: ...
    def split_views(self, rows, prior): ...


class SampledComponents(ConjugateComponents, Protocol):
    """What "evidence" adds: ln p(x_k) with theta_k integrated out, and posterior draws of theta_k."""

    def expected_data_term(self, q, stats, prior) -> torch.Tensor: ...
    def log_evidence(self, stats, prior) -> torch.Tensor: ...
    def draw(self, q, prior) -> dict: ...
    def point_of_sites(self, sites, prior) -> dict: ...


class LearnedBaseMeasure(ConjugateComponents, Protocol):
    """What ``base_measure`` adds: the clusters' moments the base measure's update takes."""

    def base_measure_moments(self, q) -> tuple: ...


def _members(protocol) -> set:
    """The names a Protocol and the protocols it extends declare."""
    return {name for cls in protocol.__mro__ if getattr(cls, "_is_protocol", False) and cls is not Protocol
            for name in (*vars(cls), *getattr(cls, "__annotations__", {})) if not name.startswith("_")}


REQUIRED = {"base": _members(ComponentFamily), "vmm": _members(ConjugateComponents),
            "natural": _members(ConjugateComponents), "fisher": set(), "moves": _members(MovingComponents),
            "evidence": _members(SampledComponents), "base_measure": _members(LearnedBaseMeasure)}


def checked(family):
    """``family``, after a TypeError naming what it lacks of the contract its capabilities promise."""
    capabilities = family.capabilities
    unknown = capabilities.closed_forms - CLOSED_FORMS
    if unknown:
        raise TypeError(f"the {family.name} family claims unknown closed forms {sorted(unknown)}")
    promised = {"base", *capabilities.closed_forms, *(("moves",) if capabilities.moves else ()),
                *(("base_measure",) if capabilities.base_measure else ())}
    missing = sorted(set().union(*(REQUIRED[what] for what in promised)) - set(dir(family)))
    if missing:
        raise TypeError(f"the {family.name} family lacks {', '.join(missing)}, which its capabilities "
                        f"({capabilities}) need (bnpzoo.families.contract)")
    return family
