"""The component table of a user's own program, read off by running it."""

import torch
from pyro import poutine
from pyro.infer import config_enumerate

from bnpzoo.families.contract import Capabilities
from bnpzoo.families.generalized_gaussian import GeneralizedGaussianFamily


class TracedFamily:
    """The component table of any program that follows the mixture contract (sites ``v``, ``mu``,
    an enumerated ``z`` and an observed ``x`` under the plate ``"data"``): the program is run with
    ``mu`` fixed and ``z`` enumerated, and ``x``'s log-density read off for every cluster. It has no
    closed forms."""

    capabilities = Capabilities()
    name = "user program"
    covariance = None

    def __init__(self, model, model_kwargs: dict):
        self.model, self.model_kwargs = model, model_kwargs

    def log_density(self, x: torch.Tensor, point: dict) -> torch.Tensor:
        means = point["means"]
        k = means.shape[0]
        if k == 1:  # the program's stick plate needs K >= 2: score a copy beside it
            return self.log_density(x, {"means": torch.cat([means, means])})[:, :1]
        fixed = {"mu": means, "v": means.new_full((k - 1,), 0.5)}
        program = poutine.enum(config_enumerate(poutine.condition(self.model, data=fixed)), first_available_dim=-2)
        with torch.no_grad():
            trace = poutine.trace(program).get_trace(x, **dict(self.model_kwargs, truncation=k))
        site = trace.nodes["x"]
        return site["fn"].log_prob(site["value"]).reshape(k, x.shape[0]).T

    # the program's fixed scale std_d for every cluster; its means' spread by the Laplace approximation
    covariances = staticmethod(GeneralizedGaussianFamily.variances)
    mean_scale = GeneralizedGaussianFamily.mean_scale

    def location_information(self, std) -> torch.Tensor:
        """Unknown for a user's likelihood: that of a Gaussian with the program's scale."""
        return 1 / torch.as_tensor(1.0 if std is None else std) ** 2
