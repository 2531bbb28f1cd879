"""The stick mixtures' learners, one record each, and the one registry that names them.

A learner is chosen once, by name, where an estimator validates its arguments (``learner(name)``);
from there on code asks the record what it is and what it can do, never its name:

- ``BatchLearner`` (vmm, ``inference.stick_mixture.vmm``): closed-form passes over every row;
- ``Learner`` (the SVI learners, ``inference.stick_mixture.session``): a guide, a paper's
  optimizer on it and its rule on the conjugate factors' natural gradient (the session's docstring);
- ``Sampler`` (gibbs, ``inference.stick_mixture.sampler``): chains of exact moves over the partition.

Each record's ``fit(estimator, x, family, clock_start)`` checks what it needs from the family
(``families.contract.Capabilities.closed_forms``) and returns a ``FitOutcome``; the estimator gives
the start (``StickMixture._fit_batch``, ``StickMixture._fit_stochastic``), as scikit-learn's
``BaseMixture.fit`` calls its subclasses' ``_initialize`` and steps.
"""

from dataclasses import dataclass, field

import torch

from bnpzoo.inference import optim as optimizers

CLOSED_FORMS = {"fisher": "per-sample Fisher", "natural": "conjugate natural-gradient estimate",
                "vmm": "batch closed-form (VMM) update", "evidence": "cluster evidence (a conjugate prior)"}


@dataclass
class FitOutcome:
    """What a learner's fit leaves for the estimator to record: the family's point estimates (the
    ``means`` and any learned spreads), the sticks, the means' factor scales (or None), the bound
    with its times, the steps, whether it converged (and why not, where the learner says it in its
    own words), where each prior phase began."""

    point: dict
    sticks: torch.Tensor
    scale: torch.Tensor | None
    trace: list = field(default_factory=list)
    seconds: list = field(default_factory=list)
    n_iter: int = 0
    converged: bool = False
    phase_starts: list = field(default_factory=lambda: [0])
    unconverged: str | None = None  # the warning's words when not converged (None: max_iter's)
    prior: object = None  # the component prior the fit ended with, where it learned it (``families.base_measure``)


class _Checks:
    """What every learner record answers the same way."""

    def check(self, family, needs: str | None = "own") -> None:
        """ValueError naming the learner and the family when the family lacks the closed form
        ``needs`` (default: the learner's own)."""
        needs = self.needs if needs == "own" else needs
        if needs is not None and needs not in family.capabilities.closed_forms:
            has = (None, *family.capabilities.closed_forms)
            fitting = [name for name, spec in REGISTRY.items() if spec.needs in has]
            raise ValueError(f"inference={self.name!r} needs the {CLOSED_FORMS[needs]} in closed form, which the "
                             f"{family.name} family lacks; use one of {', '.join(fitting)}")


@dataclass(frozen=True)
class BatchLearner(_Checks):
    """vmm: the batch closed-form learner, every row each pass (``inference.stick_mixture.vmm``)."""

    name: str = "vmm"
    needs: str = "vmm"
    learning_rate = None  # its steps follow their own rule
    enumerates = False
    streams = False  # no partial_fit
    svi = False  # no guide, no data-parallel fit
    iterations = None  # the estimator's default
    chains = None  # no chains
    batch = True  # a step is a pass over every row (``split_moves`` is its switch)

    def fit(self, estimator, x, family, clock_start: float) -> FitOutcome:
        self.check(family)
        return estimator._fit_batch(x, family, clock_start)


@dataclass(frozen=True)
class Sampler(_Checks):
    """gibbs: split-merge moves and a parallel label step over the partition, several chains under
    ``pyro.infer.MCMC`` (``inference.stick_mixture.sampler``); its iterations are kept sweeps."""

    name: str = "gibbs"
    needs: str = "evidence"
    learning_rate = None  # no step size
    iterations = 200  # kept sweeps per chain when max_iter is None
    chains = 4  # when num_chains is None: R-hat needs several
    enumerates = False
    streams = False
    svi = False
    batch = False

    def fit(self, estimator, x, family, clock_start: float) -> FitOutcome:
        self.check(family)
        return estimator._fit_sampler(x, family, clock_start)


@dataclass(frozen=True)
class Learner(_Checks):
    """One SVI learner, all that the session and the estimators need to know of it (``LEARNERS``)."""

    name: str
    guide: str  # "map", "natural", or "chosen" (the estimator's ``guide`` argument)
    learning_rate: float | None  # default step size (None: the rule has none)
    make_optim: callable  # (learning rate, per-parameter step unit or None, FisherBoard) -> PyroOptim
    natural_rule: callable  # learning rate -> its rule on the conjugate factors' natural gradient (the session's)
    unit: str | None = None  # "gradient" or "normalised": the unit of its step (StochasticSession)
    needs: str | None = None  # the family's closed form it cannot run without
    # the rule's own default step on the natural gradient, where not ``learning_rate``: momentum's
    # steady step eta / (1 - 0.9) is then sga's 0.1 (at 0.02, twice it: digits' NMI 0.707 against
    # 0.721, random_state 0 to 4)
    natural_rate: float | None = None
    convex: bool = False  # theta + eta g on the natural gradient: a convex combination for eta <= 1
    # assignments summed out by enumeration over every row (Pyro's SVI with Adam): its default batch
    # is the data, its K-means start every row, and it never takes the papers' MAP assignments
    enumerates: bool = False
    svi = True
    batch = False
    iterations = None  # the estimator's default
    chains = None  # no chains

    @property
    def streams(self) -> bool:
        """Whether it is a minibatch learner, with ``partial_fit``: all but the full-batch one."""
        return not self.enumerates

    def default_rate(self, natural: bool) -> float | None:
        """Its step when the caller gives none: on the natural gradient (``natural``) or on the
        guide's own parameters."""
        return self.natural_rate if natural and self.natural_rate is not None else self.learning_rate

    def guide_kind(self, family, chosen: str = "map") -> str:
        """The guide it fits ``family`` with: the conjugate factors ("natural", stored in natural
        parameters) wherever the family has their closed forms, for every learner where it learns a
        spread and for the papers' learners on the fixed scale too (the session's docstring); else
        its own ("map", or ``chosen`` for vi, whose full-batch Adam on the summed-out bound stays
        where the spread is fixed)."""
        if self.guide == "natural" or ("natural" in family.capabilities.closed_forms
                                       and (family.capabilities.moves or self.guide == "map")):
            return "natural"
        return chosen if self.guide == "chosen" else self.guide

    def fit(self, estimator, x, family, clock_start: float) -> FitOutcome:
        return estimator._fit_stochastic(x, clock_start)


def _named(*learners) -> dict:
    return {learner.name: learner for learner in learners}


# natural_rule: each rule on the conjugate factors' natural gradient theta_hat - theta (the session's
# docstring), eta a fraction of it (1: the conjugate optimum of the minibatch)
LEARNERS = _named(
    Learner("vi", "chosen", 0.05, lambda lr, unit, board: optimizers.adam(lr, lr_scale=unit),
            lambda lr: optimizers.adam(lr, normalised=False), unit="normalised", enumerates=True),
    Learner("sga", "map", 0.1, lambda lr, unit, board: optimizers.sga(lr, lr_scale=unit), optimizers.sga,
            unit="gradient", convex=True),
    Learner("sga-momentum", "map", 0.02, lambda lr, unit, board: optimizers.sga_momentum(lr, lr_scale=unit),
            optimizers.sga_momentum, unit="gradient", natural_rate=0.01),
    Learner("sga-fisher", "map", 0.1, lambda lr, unit, board: optimizers.sga_fisher(board, lr), optimizers.sga,
            needs="fisher", convex=True),
    Learner("svmm", "map", 0.02, lambda lr, unit, board: optimizers.svmm(lr, direction="fisher", lr_scale=unit),
            lambda lr: optimizers.svmm(lr, direction="momentum"), unit="normalised"),
    Learner("svmm-mgrad", "map", 0.1, lambda lr, unit, board: optimizers.svmm(lr, direction="momentum",
                                                                              lr_scale=unit),
            lambda lr: optimizers.svmm(lr, direction="momentum"), unit="gradient"),
    Learner("svmm-grad", "map", 0.1, lambda lr, unit, board: optimizers.svmm(lr, direction="gradient",
                                                                             lr_scale=unit), optimizers.sga,
            unit="gradient", convex=True),
    Learner("natgrad-svi", "natural", None, lambda lr, unit, board: optimizers.natural_gradient_svi(),
            lambda lr: optimizers.natural_gradient_svi(), needs="natural", convex=True),
)  # the SVI learners
REGISTRY = _named(BatchLearner(), *LEARNERS.values(), Sampler())  # every stick mixture's learner
INFERENCE = tuple(REGISTRY)
STOCHASTIC = tuple(name for name, spec in REGISTRY.items() if spec.streams)  # those with partial_fit
GENERIC = tuple(name for name, spec in LEARNERS.items() if spec.needs is None)  # those a user's program can take


def learner(name: str):
    """The record of the learner called ``name`` (validated before: ``INFERENCE``)."""
    return REGISTRY[name]
