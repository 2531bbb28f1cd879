"""The zoo's table of contents: CLI model names, their estimators and the learners that apply."""

import inspect
from dataclasses import dataclass

from bnpzoo._validation import AnyOf, Interval, OneOf, Satisfies, Scale
from bnpzoo.coupled_dp import INFERENCE as COUPLED_DP_LEARNERS, CoupledDP
from bnpzoo.docstrings import first_sentence, parameter_texts
from bnpzoo.dp_gmm import DPGMM
from bnpzoo.hdp_gd import INFERENCE as HDP_GD_LEARNERS, HDPGD
from bnpzoo.mixture import INFERENCE as MIXTURE_LEARNERS
from bnpzoo.pyp_ggm import PYPGGM

# estimator parameters that the CLI sets through its common flags, not model options
COMMON = {"truncation": "--truncation", "inference": "--inference", "max_iter": "--iters",
          "batch_size": "--batch-size", "random_state": "--seed", "device": "--device", "verbose": "--verbose",
          "data_parallel": None}  # set when torchrun started the processes


@dataclass(frozen=True)
class Entry:
    estimator: type
    learners: tuple
    grouped: bool = False  # fits a grouped corpus (fit(corpus)), not a numeric matrix
    needs_groups: bool = False  # fits numeric rows in groups (fit(X, groups))
    compared: tuple | None = None  # the learners ``bnpzoo compare`` runs (None: all of them)

    @property
    def default_learner(self) -> str:
        """The estimator's own default ``inference``: what ``bnpzoo fit`` runs without --inference."""
        return inspect.signature(self.estimator).parameters["inference"].default

    def described(self, parameter: str, generic: str = "") -> tuple[str, object]:
        """(the first sentence of the estimator's entry for ``parameter``, or ``generic``; its default)."""
        text = first_sentence(parameter_texts(self.estimator).get(parameter, generic))
        return text.replace("%", "%%"), inspect.signature(self.estimator).parameters[parameter].default

    def help_for(self, parameter: str, generic: str) -> str:
        """A flag every model shares (--truncation, --iters, ...): this model's entry for
        ``parameter`` and its default; ``generic`` where the model takes no such parameter."""
        if parameter not in inspect.signature(self.estimator).parameters:
            return generic
        text, default = self.described(parameter, generic)
        return f"{text} [default {default}]"

    def options(self):
        """(flag, parameter, argparse kwargs) for every model option of the estimator, its help the
        first sentence of the parameter's docstring entry, its range and its default."""
        for name, constraint in self.estimator._parameter_constraints.items():
            if name in COMMON or name in self.estimator._renamed or name in self.estimator._unsaved_params:
                continue  # code (a tokenizer, a Pyro program) is given in Python only
            text, default = self.described(name)
            kwargs = {"dest": name, "default": None,
                      "help": f"{text} [{constraint.describe()}; default {default}]".lstrip()}
            if isinstance(constraint, OneOf) and set(constraint.options) == {True, False}:
                kwargs.update(action="store_const", const=True, help=f"{text} [on; off by default]")
            elif isinstance(constraint, OneOf) and set(constraint.options) == {None, True, False}:
                kwargs.update(type=on_or_off, nargs="?", const=True, choices=(True, False), metavar="on|off",
                              help=f"{text} [on or off; default: the estimator chooses from the data]")
            elif isinstance(constraint, OneOf):  # None: the estimator's default, what leaving the flag out gives
                kwargs["choices"] = [option for option in constraint.options if option is not None]
            elif isinstance(constraint, (Interval, Scale, Satisfies, AnyOf)):
                kwargs["type"] = constraint.kind
            yield "--" + name.replace("_", "-"), name, kwargs


def on_or_off(text: str) -> bool:
    """A command line's on/off: on, off (and yes/no, true/false)."""
    words = {"on": True, "yes": True, "true": True, "off": False, "no": False, "false": False}
    if text.lower() not in words:
        raise ValueError(f"expected on or off, got {text!r}")
    return words[text.lower()]


MODELS = {
    "dp-gmm": Entry(DPGMM, MIXTURE_LEARNERS),
    # compared with its default likelihood (the Gaussian, a learned covariance), by the learners of [PYPM-sVMM]
    "pyp-ggm": Entry(PYPGGM, MIXTURE_LEARNERS, compared=("svmm", "svmm-mgrad", "svmm-grad")),
    "hdp-gd": Entry(HDPGD, HDP_GD_LEARNERS, needs_groups=True, compared=("vi", "online-vi")),
    "coupled-dp": Entry(CoupledDP, COUPLED_DP_LEARNERS, grouped=True),
}
