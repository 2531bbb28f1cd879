"""Observation distributions indexed by a cluster assignment, evaluated without N x K x D tensors.

Under enumeration Pyro hands the observation site an assignment ``z`` of shape (K, 1) (one row
per cluster) against N observations; the naive ``Normal(means[z], sigma)`` would then build a
K x N x D tensor. These distributions instead compute the N x K table of component
log-densities once (a matrix product, or ``torch.cdist``) and gather the entries that ``z``
names, so the cost is one pass over x and the means whatever the enumeration shape. Given one
assignment per observation (conditioned, as the MAP learners score the program) they compute
only the N densities it names (``assigned_log_density``).
"""

import copy

import torch
from pyro.distributions import TorchDistribution, constraints

from bnpzoo.distributions import GeneralizedGaussian
from bnpzoo.ops import (bernoulli_log_density, diagonal_gaussian_log_density, full_gaussian_log_density,
                        generalized_gaussian_log_density, generalized_gaussian_shape, generalized_gaussian_table)


class AssignedComponents(TorchDistribution):
    """Base: x_n ~ f(x | theta_{z_n}); subclasses give the (N, K) table and a sampler."""

    arg_constraints = {}
    support = constraints.real_vector

    def __init__(self, assignment: torch.Tensor, dim: int, validate_args=None):
        self.assignment = assignment
        super().__init__(assignment.shape, torch.Size([dim]), validate_args=validate_args)

    def component_log_density(self, x: torch.Tensor) -> torch.Tensor:  # (N, K)
        raise NotImplementedError

    def assigned_log_density(self, x: torch.Tensor) -> torch.Tensor:  # (N,): x_n under its own cluster
        return self.component_log_density(x).gather(-1, self.assignment[:, None]).squeeze(-1)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        if self.assignment.shape == x.shape[:-1]:  # one assignment per observation: not enumerated
            return self.assigned_log_density(x)
        table = self.component_log_density(x)  # (N, K)
        rows = torch.arange(x.shape[-2], device=x.device)
        return table.T[self.assignment, rows]  # broadcast of z against the data rows

    def expand(self, batch_shape, _instance=None):
        new = copy.copy(self)  # component parameters are shared; only the assignment grows
        new.assignment = self.assignment.expand(batch_shape)
        TorchDistribution.__init__(new, torch.Size(batch_shape), self.event_shape, validate_args=False)
        return new


class AssignedGeneralizedGaussian(AssignedComponents):
    """x_nd ~ GGD(mu_{z_n d}, s_d, rho) ([PYPM-sVMM] eq. (2)-(3)), every feature d with standard
    deviation ``std`` (a scalar, one per feature, or one per cluster and feature, (K, D)): s_d = std_d
    sqrt(Gamma(1/rho) / Gamma(3/rho))."""

    def __init__(self, means: torch.Tensor, std, rho: float, assignment: torch.Tensor, validate_args=None):
        self.means, self.rho = means, float(rho)
        self.std = torch.as_tensor(std, dtype=means.dtype, device=means.device)
        self.per_cluster = self.std.dim() == 2
        super().__init__(assignment, means.shape[-1], validate_args=validate_args)

    def component_log_density(self, x):
        if self.per_cluster:
            return generalized_gaussian_table(x, self.means, self.std, self.rho)
        return generalized_gaussian_log_density(x, self.means, self.std, self.rho)

    def assigned_log_density(self, x):
        std = self.std[self.assignment] if self.per_cluster else self.std
        return generalized_gaussian_log_density(x, self.means[self.assignment], std, self.rho, paired=True)

    def sample(self, sample_shape=torch.Size()):
        assignment = self.assignment.expand(sample_shape + self.batch_shape)
        loc = self.means[assignment]
        shape = generalized_gaussian_shape(self.std[assignment] if self.per_cluster else self.std, self.rho)
        return GeneralizedGaussian(loc, shape.expand_as(loc), torch.full_like(loc, self.rho)).sample()


class AssignedNormal(AssignedGeneralizedGaussian):
    """x_n ~ N(mu_{z_n}, diag(sigma^2)): [DPM-SGA] section 2.1, x | z, mu ~ N(mu, sigma)_z; the
    rho = 2 member of the family above (sigma a scalar, or one per feature)."""

    def __init__(self, means: torch.Tensor, sigma, assignment: torch.Tensor, validate_args=None):
        super().__init__(means, sigma, 2.0, assignment, validate_args=validate_args)

    def sample(self, sample_shape=torch.Size()):
        loc = self.means[self.assignment.expand(sample_shape + self.batch_shape)]
        return loc + self.std * torch.randn_like(loc)


class AssignedGaussian(AssignedComponents):
    """x_n ~ N(mu_{z_n}, Lambda_{z_n}^-1) with a precision per cluster: ``precisions`` (K, D) for
    diagonal covariances, or (K, D, D) matrices (their Cholesky factors give the table through one
    matrix product per cluster, ``ops.full_gaussian_log_density``)."""

    def __init__(self, means: torch.Tensor, precisions: torch.Tensor, assignment: torch.Tensor, validate_args=None):
        self.means, self.precisions = means, precisions
        self.full = precisions.ndim == 3
        self.factor = torch.linalg.cholesky(precisions) if self.full else None
        super().__init__(assignment, means.shape[-1], validate_args=validate_args)

    def component_log_density(self, x):
        if self.full:
            return full_gaussian_log_density(x, self.means, self.factor)
        return diagonal_gaussian_log_density(x, self.means, self.precisions)

    def sample(self, sample_shape=torch.Size()):
        z = self.assignment.expand(sample_shape + self.batch_shape)
        loc, noise = self.means[z], torch.randn_like(self.means[z])
        if not self.full:
            return loc + noise * self.precisions[z].rsqrt()
        # x = mu + L^-T e has covariance (L L^T)^-1 = Lambda^-1
        return loc + torch.linalg.solve_triangular(self.factor[z].transpose(-2, -1), noise[..., None],
                                                   upper=True)[..., 0]


class AssignedBernoulli(AssignedComponents):
    """x_nd ~ Bernoulli(p_{z_n d}), binary features with a probability per cluster and feature."""

    support = constraints.independent(constraints.boolean, 1)

    def __init__(self, probs: torch.Tensor, assignment: torch.Tensor, validate_args=None):
        self.probs = probs
        super().__init__(assignment, probs.shape[-1], validate_args=validate_args)

    def component_log_density(self, x):
        return bernoulli_log_density(x, self.probs)

    def sample(self, sample_shape=torch.Size()):
        return torch.bernoulli(self.probs[self.assignment.expand(sample_shape + self.batch_shape)])
