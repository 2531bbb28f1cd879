"""The papers' learners as ``torch.optim.Optimizer`` subclasses, each with a ``PyroOptim`` factory.

Every rule is written as in the papers, as *ascent* on the variational log-posterior ln q(theta)
with g its minibatch-averaged gradient ([DPM-SGA] eq. (10)). Pyro minimises a loss, so the
optimizers read g = -p.grad. The learner (``inference.svi``) scales the model and guide by 1/N,
which makes -p.grad exactly that average.

    SGA           E[theta] <- E[theta] + eta g                            [DPM-SGA] eq. (6), (11), (13)
    SGAMomentum   gamma <- a gamma + eta g;  E[theta] <- E[theta] + gamma   [DPM-SGA] eq. (7)
    SGAFisher     E[theta] <- E[theta] + eta g / F,                       [DPM-SGA] eq. (8), (9), (16)
                  F = (1/M) sum_n (grad ln q_n)^2, per-sample squared gradients (diagonal Fisher)
    SVMM          p_t = (tau + t)^-kappa                                  [PYPM-sVMM] eq. (11), (13), (14)
                  W_t = (1 - p_t) W_{t-1} + p_t g_t;  F_t = (1 - p_t) F_{t-1} + p_t g_t^2
                  direction "fisher":   E[theta] + eta W_t / sqrt(F_t)   (sVMM, case 3 of VI.C)
                  direction "momentum": E[theta] + eta W_t               (mgrad, case 2)
                  direction "gradient": E[theta] + eta g_t               (grad, case 1)
    NaturalGradientSVI  theta <- (1 - p_t) theta + p_t theta_hat          [PYPM-sVMM] eq. (10), Table I
    Adam          Kingma and Ba (2015), the ``vi`` learner's rule, here so that its step has a unit

How the PyroOptim contract is met (traps found by running it). PyroOptim builds one optimizer per
parameter and hands it the *unconstrained* tensor with no closure:

- every rule above is elementwise, so one optimizer per tensor is all it needs, and it acts on the
  unconstrained coordinates (a stick is moved in logit space, by the chain rule's gradient);
- the per-sample Fisher cannot be read off p.grad, which only holds the minibatch sum. The learner
  computes it (vectorised, see ``inference.stick_mixture.fisher``) on the same minibatch before the step and
  posts it on a ``FisherBoard``; PyroOptim's per-parameter ``optim_args`` callable hands each
  parameter's optimizer the board entry under that parameter's name;
- natural-gradient SVI needs theta_hat - theta, not a gradient of the bound. The learner's loss
  for it is the surrogate 1/2 |theta - stopgrad(theta_hat)|^2, whose gradient is theta - theta_hat,
  so a plain step of size p_t is the convex combination above. The natural parameters are stored
  unconstrained (a convex combination with p_t in (0, 1] keeps them in their domain);
- pruning clusters changes parameter shapes; ``carry_state`` moves each optimizer and its
  buffers to the new tensor, keeping the rows of the surviving clusters.
"""

import torch
from pyro.optim import PyroOptim


def decaying_step(t: int, tau: float, kappa: float) -> float:
    """p_t = (tau + t)^-kappa ([PYPM-sVMM] section IV.B), t = 1, 2, ..."""
    return (tau + t) ** -kappa


def ascend(p: torch.Tensor, direction: torch.Tensor, lr) -> None:
    """p += lr * direction in place; ``lr`` a number or a tensor that broadcasts against p (a step
    per feature, where features differ in scale)."""
    if torch.is_tensor(lr):
        p.addcmul_(direction, lr)
    else:
        p.add_(direction, alpha=lr)


class ElementwiseAscent(torch.optim.Optimizer):
    """Base: ``update(p, g, group, state)`` moves each parameter along g = -p.grad (the gradient
    of ln q averaged over the minibatch); ``state`` is that parameter's buffers, created lazily.
    A group's ``lr`` may be a tensor broadcasting against the parameter."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self.update(p, -p.grad, group, self.state[p])

    def update(self, p, g, group, state):
        raise NotImplementedError

    # torch wraps these in ``torch._disable_dynamo``, whose first call imports torch._dynamo: 1.4 to
    # 2.1 s of a fresh process's first stochastic fit (vmm's, 2.4 s on 100,000 x 64, paid none). These
    # optimizers never run under torch.compile, so they call torch's functions themselves.
    add_param_group = torch.optim.Optimizer.add_param_group.__wrapped__
    zero_grad = torch.optim.Optimizer.zero_grad.__wrapped__
    state_dict = torch.optim.Optimizer.state_dict.__wrapped__
    load_state_dict = torch.optim.Optimizer.load_state_dict.__wrapped__


class SGA(ElementwiseAscent):
    """Constant-step gradient ascent, [DPM-SGA] eq. (6)."""

    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def update(self, p, g, group, state):
        ascend(p, g, group["lr"])


class SGAMomentum(ElementwiseAscent):
    """Gradient ascent with momentum, [DPM-SGA] eq. (7); momentum = 0 is SGA."""

    def __init__(self, params, lr=0.1, momentum=0.9):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    def update(self, p, g, group, state):
        if "velocity" not in state:
            # gamma of eq. (7): the smoothed ascent step
            state["velocity"] = torch.zeros_like(p)
        velocity = state["velocity"].mul_(group["momentum"])
        ascend(velocity, g, group["lr"])
        p.add_(velocity)


class Adam(ElementwiseAscent):
    """Adam (D. Kingma, J. Ba, ICLR 2015) as ascent on ln q, with torch's buffers and arithmetic.
    It moves every coordinate by about ``lr`` whatever its gradient's scale, so a step in the
    data's units needs an ``lr`` per feature (``lr_scale``), which ``torch.optim.Adam`` does not
    take: with one lr for all, features of spread 1e-8 beside features of spread 0.2 (proportions
    of a histogram) took steps of 1e8 of their spreads, and ``vi`` collapsed into one or two
    clusters (``benchmarks/reports/vi_step.md``)."""

    def __init__(self, params, lr=0.05, betas=(0.9, 0.999), eps=1e-8, normalised=True):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, normalised=normalised))

    def update(self, p, g, group, state):
        if "exp_avg" not in state:
            state["exp_avg"], state["exp_avg_sq"] = torch.zeros_like(p), torch.zeros_like(p)
        state["step"] = t = int(state.get("step", 0)) + 1  # a tensor in torch's own Adam (older files)
        b1, b2 = group["betas"]
        m = state["exp_avg"].lerp_(g, 1 - b1)
        if not group["normalised"]:  # g preconditioned already (a natural gradient): the first moment alone
            ascend(p, m / (1 - b1 ** t), group["lr"])
            return
        v = state["exp_avg_sq"].mul_(b2).addcmul_(g, g, value=1 - b2)
        ascend(p, (m / (1 - b1 ** t)) / (v.sqrt() / (1 - b2 ** t) ** 0.5).add_(group["eps"]), group["lr"])


class FisherBoard(dict):
    """Per-sample Fisher diagonals posted by the learner, keyed by parameter name."""

    def entry(self, name: str):
        return lambda: self[name]


class SGAFisher(ElementwiseAscent):
    """Gradient ascent preconditioned by the per-sample Fisher, [DPM-SGA] eq. (8), (9), (16).

    ``fisher`` is a callable returning F for this parameter (broadcastable to it), the mean over
    the minibatch of squared per-sample gradients; ``eps`` keeps the step finite where F = 0.
    """

    def __init__(self, params, lr=0.1, fisher=None, eps=1e-8):
        if fisher is None:
            raise ValueError("SGAFisher needs fisher=, a callable giving the per-sample Fisher diagonal")
        super().__init__(params, dict(lr=lr, fisher=fisher, eps=eps))

    def update(self, p, g, group, state):
        ascend(p, g / (group["fisher"]() + group["eps"]), group["lr"])


class SVMM(ElementwiseAscent):
    """Stochastic VMM, [PYPM-sVMM] eq. (11), (13), (14), and its ablations (section VI.C)."""

    DIRECTIONS = ("fisher", "momentum", "gradient")

    def __init__(self, params, lr=0.05, tau=1.0, kappa=0.5, direction="fisher", eps=1e-8):
        if direction not in self.DIRECTIONS:
            raise ValueError(f"direction must be one of {self.DIRECTIONS}, got {direction!r}")
        super().__init__(params, dict(lr=lr, tau=tau, kappa=kappa, direction=direction, eps=eps))

    def update(self, p, g, group, state):
        if not state:
            state["t"] = 0
            # W_t: decaying-step average of the gradient, eq. (11)
            state["mean_gradient"] = torch.zeros_like(p)
            # F_t: decaying-step average of the squared gradient, eq. (13)
            state["mean_square"] = torch.zeros_like(p)
        state["t"] += 1
        rate = decaying_step(state["t"], group["tau"], group["kappa"])
        w = state["mean_gradient"].lerp_(g, rate)
        f = state["mean_square"].lerp_(g * g, rate)
        if group["direction"] == "fisher":  # eq. (14)
            ascend(p, w / f.sqrt().add_(group["eps"]), group["lr"])
        elif group["direction"] == "momentum":
            ascend(p, w, group["lr"])
        else:
            ascend(p, g, group["lr"])


class NaturalGradientSVI(ElementwiseAscent):
    """theta <- theta + p_t g; under the surrogate loss (module docstring) g = theta_hat - theta,
    so this is theta <- (1 - p_t) theta + p_t theta_hat, [PYPM-sVMM] eq. (10)."""

    def __init__(self, params, tau=1.0, kappa=0.5):
        super().__init__(params, dict(tau=tau, kappa=kappa))

    def update(self, p, g, group, state):
        state["t"] = state.get("t", 0) + 1
        p.add_(g, alpha=decaying_step(state["t"], group["tau"], group["kappa"]))


# -- PyroOptim factories, by learner name ----------------------------------------------------------
def _factory(optimizer, lr_scale=None, **args):
    """PyroOptim with per-parameter arguments: a callable among ``args`` is called with the
    parameter's name (the Fisher board's entry), and ``lr_scale`` maps names to a factor on
    ``lr`` (a unit for the step, see ``bnpzoo.mixture``)."""

    def per_parameter(name):
        out = {key: value(name) if callable(value) else value for key, value in args.items()}
        if lr_scale and "lr" in out:
            out["lr"] = out["lr"] * lr_scale.get(name, 1.0)  # a number, or a tensor per feature
        return out

    return PyroOptim(optimizer, per_parameter)


def adam(lr=0.05, lr_scale=None, normalised=True):
    return _factory(Adam, lr_scale, lr=lr, normalised=normalised)


def sga(lr=0.1, lr_scale=None):
    return _factory(SGA, lr_scale, lr=lr)


def sga_momentum(lr=0.1, momentum=0.9, lr_scale=None):
    return _factory(SGAMomentum, lr_scale, lr=lr, momentum=momentum)


def sga_fisher(board: FisherBoard, lr=0.1, eps=1e-8, lr_scale=None):
    return _factory(SGAFisher, lr_scale, lr=lr, fisher=board.entry, eps=eps)


def svmm(lr=0.05, tau=1.0, kappa=0.5, direction="fisher", lr_scale=None):
    return _factory(SVMM, lr_scale, lr=lr, tau=tau, kappa=kappa, direction=direction)


def natural_gradient_svi(tau=1.0, kappa=0.5):
    return _factory(NaturalGradientSVI, None, tau=tau, kappa=kappa)


def carry_state(pyro_optim: PyroOptim, old: torch.Tensor, new: torch.Tensor, rows: torch.Tensor) -> None:
    """After pruning (or a move), let ``new`` (= old[rows] up to re-parametrisation) keep old's
    optimizer: buffers shaped like ``old`` are indexed by ``rows`` along dim 0, a row -1 (a cluster
    a birth opened) starting at zero; counters are kept."""
    optimizer = pyro_optim.optim_objs.pop(old, None)
    clip = pyro_optim.grad_clip.pop(old, None)
    if optimizer is None:
        return
    state = optimizer.state.pop(old, {})
    kept = rows >= 0

    def carried(buffer):
        out = buffer.new_zeros((rows.numel(),) + buffer.shape[1:])
        out[kept] = buffer[rows[kept]]
        return out

    optimizer.state[new] = {k: carried(v) if torch.is_tensor(v) and v.shape == old.shape else v
                            for k, v in state.items()}
    optimizer.param_groups[0]["params"] = [new]
    pyro_optim.optim_objs[new] = optimizer
    pyro_optim.grad_clip[new] = clip


def optimizer_state(pyro_optim: PyroOptim, params: dict) -> dict:
    """{parameter name: {"state": its optimizer's buffers, "lr": its step}} for the unconstrained
    tensors ``params`` (name -> tensor): plain tensors and numbers, which a weights-only file holds
    (the optimizers' other arguments, callables among them, come from the learner's factory)."""
    out = {}
    for name, p in params.items():
        optimizer = pyro_optim.optim_objs.get(p)
        if optimizer is not None:
            out[name] = {"state": dict(optimizer.state.get(p, {})), "lr": optimizer.param_groups[0].get("lr")}
    return out


def restore_optimizer_state(pyro_optim: PyroOptim, params: dict, saved: dict) -> None:
    """Give each tensor of ``params`` (name -> unconstrained tensor) its optimizer, made by the
    learner's factory, with the buffers and step of ``optimizer_state``."""
    for name, entry in saved.items():
        p = params[name]
        optimizer = pyro_optim.optim_objs[p] = pyro_optim._get_optim(p)
        pyro_optim.grad_clip[p] = pyro_optim._get_grad_clip(p)
        optimizer.state[p] = dict(entry["state"])
        if entry["lr"] is not None:  # natural-gradient SVI's step is its schedule, not an lr
            optimizer.param_groups[0]["lr"] = entry["lr"]


def scale_steps(pyro_optim: PyroOptim, factor: float) -> None:
    """Multiply the step size of every parameter's optimizer by ``factor``."""
    for optimizer in pyro_optim.optim_objs.values():
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] * factor
