"""The papers' optimizers: each reaches a known optimum, through PyroOptim and pyro.infer.SVI."""

import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.infer import SVI, Trace_ELBO
from torch.distributions import constraints

from bnpzoo.inference import optim

GRADIENT_RULES = {  # name -> (factory of a torch optimizer on [theta], tolerance)
    "sga": (lambda p: optim.SGA(p, lr=0.5), 1e-6),
    "sga-momentum": (lambda p: optim.SGAMomentum(p, lr=0.05), 1e-6),
    "svmm": (lambda p: optim.SVMM(p, lr=0.01, direction="fisher"), 2e-2),
    "svmm-mgrad": (lambda p: optim.SVMM(p, lr=0.5, direction="momentum"), 1e-3),
    "svmm-grad": (lambda p: optim.SVMM(p, lr=0.5, direction="gradient"), 1e-6),
}


def _quadratic():
    """ln q(theta) = -1/2 sum_i a_i (theta_i - c_i)^2: the optimum is c."""
    return torch.tensor([1.0, 2.0, 0.5]), torch.tensor([3.0, -1.0, 0.25])


@pytest.mark.parametrize("name", GRADIENT_RULES)
def test_gradient_rules_reach_the_optimum_of_a_quadratic(name):
    make, tol = GRADIENT_RULES[name]
    a, c = _quadratic()
    theta = torch.zeros(3, requires_grad=True)
    opt = make([theta])
    for _ in range(2000):
        opt.zero_grad()
        (0.5 * a * (theta - c) ** 2).sum().backward()  # the loss is -ln q
        opt.step()
    assert (theta.detach() - c).abs().max() < tol


def test_fisher_rule_takes_newton_steps_on_a_quadratic():
    """With per-sample gradients x_n - theta (l_n = -(x_n - theta)^2 / 2), F = mean (x_n - theta)^2
    and the optimum is the sample mean."""
    x = torch.tensor([[0.0, 1.0], [2.0, 5.0], [4.0, 3.0]])
    theta = torch.zeros(2, requires_grad=True)
    fisher = lambda: ((x - theta.detach()) ** 2).mean(0)
    opt = optim.SGAFisher([theta], lr=0.5, fisher=fisher)
    for _ in range(200):
        opt.zero_grad()
        (0.5 * ((x - theta) ** 2).mean(0)).sum().backward()
        opt.step()
    assert torch.allclose(theta.detach(), x.mean(0), atol=1e-5)


def test_fisher_rule_needs_a_fisher():
    with pytest.raises(ValueError, match="fisher"):
        optim.SGAFisher([torch.zeros(1, requires_grad=True)])


def test_natural_gradient_rule_is_the_svi_convex_combination():
    theta = torch.tensor([1.0, 4.0], requires_grad=True)
    target = torch.tensor([3.0, 0.0])
    opt = optim.NaturalGradientSVI([theta], tau=1.0, kappa=0.5)
    expected = theta.detach().clone()
    for t in range(1, 6):
        opt.zero_grad()
        (0.5 * (theta - target) ** 2).sum().backward()
        opt.step()
        rate = (1.0 + t) ** -0.5
        expected = (1 - rate) * expected + rate * target
        assert torch.allclose(theta.detach(), expected, atol=1e-6)


# -- a Beta posterior, under pyro.infer.SVI with PyroOptim ------------------------------------
FLIPS = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0] * 3)
A, B = 2.0, 3.0  # prior Beta(A, B); posterior Beta(A + sum x, B + N - sum x)
N, HEADS = FLIPS.numel(), float(FLIPS.sum())
MODE = (A - 1 + HEADS) / (A + B - 2 + N)


def bernoulli_model(data):
    v = pyro.sample("v", dist.Beta(A, B))
    with pyro.plate("data", data.shape[0]):
        pyro.sample("x", dist.Bernoulli(v), obs=data)


def map_guide(data):
    pyro.sample("v", dist.Delta(pyro.param("v_map", torch.tensor(0.5), constraint=constraints.unit_interval)))


def _fisher_of_the_logit():
    """Per-sample squared gradients in u = logit v of l_n = ln Bern(x_n | v) + ln Beta(v) / N."""
    v = pyro.param("v_map").detach()
    prior = ((A - 1) * (1 - v) - (B - 1) * v) / N
    return ((FLIPS - v + prior) ** 2).mean()


PYRO_RULES = {  # name -> PyroOptim factory taking the FisherBoard
    "sga": lambda board: optim.sga(lr=0.5),
    "sga-momentum": lambda board: optim.sga_momentum(lr=0.05),
    "sga-fisher": lambda board: optim.sga_fisher(board, lr=0.5),
    "svmm": lambda board: optim.svmm(lr=0.02),
    "svmm-mgrad": lambda board: optim.svmm(lr=0.5, direction="momentum"),
    "svmm-grad": lambda board: optim.svmm(lr=0.5, direction="gradient"),
}


@pytest.mark.parametrize("name", PYRO_RULES)
def test_rules_reach_the_mode_of_a_beta_posterior_under_svi(name):
    board = optim.FisherBoard()
    scaled = lambda fn: pyro.poutine.scale(fn, 1.0 / N)  # -grad is then the per-sample mean
    svi = SVI(scaled(bernoulli_model), scaled(map_guide), PYRO_RULES[name](board), Trace_ELBO())
    map_guide(FLIPS)  # create v_map
    for _ in range(400):
        board["v_map"] = _fisher_of_the_logit()
        svi.step(FLIPS)
    tol = 1e-2 if name == "svmm" else 1e-4
    assert abs(pyro.param("v_map").item() - MODE) < tol


def test_natural_gradient_svi_reaches_the_beta_posterior_under_svi():
    """q(v) = Beta(c1, c0), minibatches of 10: theta_hat = (A + N mean x_B, B + N (1 - mean x_B));
    with kappa = 1 the update is the running average of theta_hat, which converges to the exact
    posterior (A + heads, B + tails) at rate 1 / sqrt(t)."""

    def guide(data):
        pyro.sample("v", dist.Beta(pyro.param("c1", torch.tensor(1.0)), pyro.param("c0", torch.tensor(1.0))))

    def surrogate(model, guide, data):
        batch = data[torch.randint(0, N, (10,))]
        target = {"c1": A + N * batch.mean(), "c0": B + N * (1 - batch.mean())}
        return sum(0.5 * (pyro.param(k) - t) ** 2 for k, t in target.items())

    pyro.param("c1", torch.tensor(1.0)), pyro.param("c0", torch.tensor(1.0))
    svi = SVI(bernoulli_model, guide, optim.natural_gradient_svi(tau=1.0, kappa=1.0), surrogate)
    for _ in range(1500):
        svi.step(FLIPS)
    assert abs(pyro.param("c1").item() - (A + HEADS)) < 0.5
    assert abs(pyro.param("c0").item() - (B + N - HEADS)) < 0.5


def test_carry_state_keeps_the_rows_of_kept_clusters():
    old = torch.zeros(4, 2, requires_grad=True)
    pyro_optim = optim.svmm()
    old.grad = torch.arange(8.0).reshape(4, 2)
    pyro.get_param_store()["mu"] = old  # PyroOptim names parameters through the store
    old = pyro.get_param_store()["mu"].unconstrained()
    old.grad = torch.arange(8.0).reshape(4, 2)
    pyro_optim([old])
    before = pyro_optim.optim_objs[old].state[old]["mean_gradient"].clone()
    new = old.detach()[[2, 0]].requires_grad_()
    optim.carry_state(pyro_optim, old, new, torch.tensor([2, 0]))
    state = pyro_optim.optim_objs[new].state[new]
    assert torch.equal(state["mean_gradient"], before[[2, 0]]) and state["t"] == 1
    assert old not in pyro_optim.optim_objs
    # a row -1 is a cluster a birth opened: its buffers start at zero
    newer = new.detach()[[0, 1, 1]].requires_grad_()
    optim.carry_state(pyro_optim, new, newer, torch.tensor([1, -1, 0]))
    state = pyro_optim.optim_objs[newer].state[newer]
    assert torch.equal(state["mean_gradient"], torch.stack([before[0], torch.zeros(2), before[2]]))


def test_adam_without_normalising_steps_along_its_bias_corrected_first_moment():
    """On a gradient preconditioned already (the conjugate factors' natural gradient), Adam keeps its
    first moment and drops the division by the root of the second."""
    p = torch.zeros(3, requires_grad=True)
    rule = optim.Adam([p], lr=0.5, normalised=False)
    grads = [torch.tensor([1.0, -2.0, 4.0]), torch.tensor([3.0, 0.0, -1.0])]
    m = torch.zeros(3)
    expected = torch.zeros(3)
    for t, g in enumerate(grads, 1):
        p.grad = -g  # the rules ascend: g = -p.grad
        rule.step()
        m = 0.9 * m + 0.1 * g
        expected += 0.5 * m / (1 - 0.9**t)
    torch.testing.assert_close(p.detach(), expected)


@pytest.mark.parametrize("make", [lambda p, lr: optim.SGA(p, lr=lr), lambda p, lr: optim.SGAMomentum(p, lr=lr),
                                  lambda p, lr: optim.Adam(p, lr=lr),
                                  lambda p, lr: optim.SVMM(p, lr=lr, direction="fisher"),
                                  lambda p, lr: optim.SVMM(p, lr=lr, direction="momentum")])
def test_a_step_per_feature_equals_separate_steps_per_feature(make):
    """A tensor lr (one step per feature, features in different units) acts coordinate-wise."""
    lr = torch.tensor([0.5, 0.05])
    together = torch.zeros(2, requires_grad=True)
    apart = [torch.zeros(1, requires_grad=True) for _ in range(2)]
    opt_together = make([together], lr)
    opt_apart = [make([p], float(rate)) for p, rate in zip(apart, lr)]
    target = torch.tensor([3.0, -1.0])
    runs = [(opt_together, together, target)]
    runs += [(opt, p, target[i : i + 1]) for i, (opt, p) in enumerate(zip(opt_apart, apart))]
    for _ in range(20):
        for opt, params, goal in runs:
            opt.zero_grad()
            (0.5 * (params - goal) ** 2).sum().backward()
            opt.step()
    assert torch.allclose(together.detach(), torch.cat([p.detach() for p in apart]))


def test_adam_takes_torchs_adam_steps():
    """vi's rule is Adam: with one lr for all coordinates, the path of ``torch.optim.Adam``."""
    a, c = _quadratic()
    ours, torchs = (torch.zeros(3, requires_grad=True) for _ in range(2))
    runs = [(optim.Adam([ours], lr=0.1), ours), (torch.optim.Adam([torchs], lr=0.1), torchs)]
    for _ in range(300):
        for opt, theta in runs:
            opt.zero_grad()
            (0.5 * a * (theta - c) ** 2).sum().backward()
            opt.step()
        assert torch.allclose(ours, torchs, rtol=1e-5, atol=1e-6)
    assert (ours.detach() - c).abs().max() < 0.05
