"""The zoo's table of contents: CLI model names, their estimators and the learners that apply."""

from dataclasses import dataclass

from bnpzoo._validation import Interval, OneOf
from bnpzoo.coupled_dp import INFERENCE as COUPLED_DP_LEARNERS, CoupledDP
from bnpzoo.dp_gmm import DPGMM, INFERENCE as DP_GMM_LEARNERS

# estimator parameters that the CLI sets through its common flags, not model options
COMMON = {"truncation": "--truncation", "inference": "--inference", "max_iter": "--iters",
          "batch_size": "--batch-size", "random_state": "--seed", "device": "--device", "verbose": "--verbose"}


@dataclass(frozen=True)
class Entry:
    estimator: type
    learners: tuple
    grouped: bool = False  # fits a grouped corpus (fit(corpus)), not a numeric matrix

    def options(self):
        """(flag, parameter, argparse kwargs) for every model option of the estimator."""
        for name, constraint in self.estimator._parameter_constraints.items():
            if name in COMMON:
                continue
            kwargs = {"dest": name, "default": None, "help": f"{constraint.describe()}"}
            if isinstance(constraint, OneOf):
                kwargs["choices"] = constraint.options
            elif isinstance(constraint, Interval):
                kwargs["type"] = int if constraint.kind is int else float
            yield "--" + name.replace("_", "-"), name, kwargs


MODELS = {
    "dp-gmm": Entry(DPGMM, DP_GMM_LEARNERS),
    "coupled-dp": Entry(CoupledDP, COUPLED_DP_LEARNERS, grouped=True),
}
