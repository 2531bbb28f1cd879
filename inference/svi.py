"""The generic learner: SVI steps of any model + guide with any ``PyroOptim``, over minibatches.

One step (the loop of ``pyro.infer.SVI.step``, written out so that nothing syncs with the host):

1. draw a minibatch of indices and fix the model's data plate to it (``poutine.condition`` on
   the plate's subsample site, named ``"data"`` in every zoo model), so Pyro scales the
   likelihood by N / M and the learner knows which samples were drawn;
2. scale model and guide by 1 / N, so -grad is the minibatch average of grad ln q ([DPM-SGA]
   eq. (10)): the g that the papers' optimizers (``inference.optim``) step along;
3. ``before_step(indices)``: a hook for what needs the same minibatch (the per-sample Fisher);
   it may return values to condition the model on for this step (the MAP assignments ``z``,
   decoded by the learner's own rule);
4. the loss: ``"enum"`` sums the assignments out (``TraceEnum_ELBO``); ``"map"`` scores the model
   at MAP assignments ([DPM-SGA] eq. (15)): those ``before_step`` returned, or else each sample's
   MAP cluster under the program itself (``infer_discrete`` at temperature 0); or any callable
   ``loss(model, guide, *args, **kwargs)``;
5. backward; in a data-parallel fit the gradients are averaged over the ranks
   (``inference.data_parallel``); one optimizer step per parameter, gradients zeroed.

Pyro's validation (argument and support checks, model against guide), where enabled, runs on the
first step only (on every step it cost a fifth of a step). A step that diverges later surfaces as a
non-finite bound at the next evaluation, which stops the run with a message.

Every ``window`` steps ``evaluate()`` scores the bound on a fixed evaluation minibatch
([PYPM-sVMM] eq. (22)-(23)), then ``reorganise()`` may reorder and prune clusters ([PYPM-sVMM]
V.D). The run has converged when the bound's relative change between two evaluations is at most
``tol``.
"""

import time
from dataclasses import dataclass, field

import pyro
import torch
from pyro import poutine
from pyro.infer import TraceEnum_ELBO, infer_discrete
from pyro.infer.util import is_validation_enabled, zero_grads
from bnpzoo.progress import progress

from bnpzoo.inference import data_parallel
from bnpzoo.mapped import release

DATA_PLATE = "data"
CONVERGED = "converged"  # what a ``moves`` hook returns to stop the run as converged


@dataclass
class SVIRun:
    elbo_trace: list[float] = field(default_factory=list)  # bound at each evaluation
    seconds: list[float] = field(default_factory=list)  # wall time at each evaluation
    n_iter: int = 0
    converged: bool = False


def scored_loss(model, guide, *args, **kwargs):
    """ln q(theta) - ln p(x, theta) at one draw of the guide, for models with no latent site the
    guide leaves out (conditioned assignments): ``Trace_ELBO``'s loss with one particle, without its
    per-step checks of model against guide (the first, validated step makes them; a test compares
    the gradients)."""
    guide_trace = poutine.trace(guide).get_trace(*args, **kwargs)
    model_trace = poutine.trace(poutine.replay(model, trace=guide_trace)).get_trace(*args, **kwargs)
    return guide_trace.log_prob_sum() - model_trace.log_prob_sum()


def map_assignment_loss(model, guide, *args, **kwargs):
    """-(ln p(x, z_hat, theta) - ln q(theta)) with z_hat the MAP assignments given theta
    ([DPM-SGA] eq. (15)), decoded from the program by ``infer_discrete``."""
    guide_trace = poutine.trace(guide).get_trace(*args, **kwargs)
    with torch.no_grad():
        decoder = infer_discrete(poutine.replay(model, trace=guide_trace), first_available_dim=-2, temperature=0)
        decoded = poutine.trace(decoder).get_trace(*args, **kwargs)
    assigned = {name: site["value"] for name, site in decoded.nodes.items()
                if site["type"] == "sample" and site["infer"].get("enumerate")}
    # the guide replays its first draw, so z_hat and the scored theta are the same sample
    return scored_loss(poutine.condition(model, data=assigned), poutine.replay(guide, trace=guide_trace), *args,
                       **kwargs)


def _loss_function(loss):
    if callable(loss):
        return loss
    if loss == "enum":
        return TraceEnum_ELBO(max_plate_nesting=1).differentiable_loss
    if loss == "map":
        return map_assignment_loss
    raise ValueError(f"loss must be 'enum', 'map' or a callable, got {loss!r}")


# a memoized learner's pass: at most this many batches of at least this many rows, and at most that many
MEMO_BATCHES, MEMO_ROWS, MEMO_MOST_ROWS = 20, 1000, 10_000


def memo_batch_size(n: int) -> int:
    """The rows of a memoized learner's batches where the caller gives none (the stick mixtures'
    stochastic learners on the conjugate factors, whose births and merges are judged once a pass;
    HDP-GD's online-vi): a pass of at most ``MEMO_BATCHES`` batches of at least ``MEMO_ROWS``
    rows. For online-vi, 200-row batches took 1.4 to 9 s on 1,200 to 3,000 rows, 1,000-row ones
    0.5 to 1.0 s, at the same NMI. At most ``MEMO_MOST_ROWS``: a step's work and memory stay those of
    a batch whatever N (300,000 rows a step at 6,000,000; the record, ``memo.Memo``, then holds a
    sample of the rows)."""
    return min(n, max(MEMO_ROWS, min(MEMO_MOST_ROWS, -(-n // MEMO_BATCHES))))


def minibatch_indices(n: int, size: int | None, device) -> torch.Tensor:
    """``size`` indices drawn uniformly with replacement, or all of them when size >= n. Drawn by
    torch's CPU generator on every device: the one whose state a saved stream keeps (a CUDA draw
    resumed after ``load`` took other rows), and CPU and GPU fits see the same minibatches."""
    if size is None or size >= n:
        return torch.arange(n, device=device)
    return torch.randint(0, n, (size,)).to(device)


def evaluation_indices(n: int, size: int, device) -> torch.Tensor:
    """The fixed evaluation minibatch: ``size`` distinct indices (all n when size >= n), drawn on
    the CPU as ``minibatch_indices``."""
    return torch.randperm(n)[:size].to(device)


def svi_step(program, data, indices, *, loss_fn, fixed=None):
    """Steps 1, 2, 4 and 5 of the module docstring; ``fixed`` holds sites the model is conditioned
    on besides the minibatch (MAP assignments), scored by ``scored_loss``. Returns the (detached)
    loss tensor."""
    scale = 1.0 / data.shape[0]
    conditioned = poutine.scale(poutine.condition(program.model, data={DATA_PLATE: indices, **(fixed or {})}), scale)
    with poutine.trace(param_only=True) as params:
        loss = (scored_loss if fixed else loss_fn)(conditioned, poutine.scale(program.guide, scale), data,
                                                   subsample_size=indices.numel(), **program.model_kwargs)
        loss.backward()
    unconstrained = [params.trace.nodes[name]["value"].unconstrained() for name in sorted(params.trace.nodes)]
    data_parallel.average_gradients(unconstrained, indices.numel(), data_parallel.group_of(data))
    program.optim(unconstrained)
    zero_grads(unconstrained)
    return loss.detach()


@dataclass
class SVIProgram:
    """What ``run_svi`` steps: a program, its guide, their keyword arguments, an optimizer and a
    loss (``"enum"``, ``"map"`` or a callable; step 4 of the module docstring), as Pyro's
    ``SVI(model, guide, optim, loss)``."""

    model: callable
    guide: callable
    optim: pyro.optim.PyroOptim
    model_kwargs: dict = field(default_factory=dict)
    loss: object = "enum"


@dataclass
class Schedule:
    """When a run stops: after ``max_iter`` steps, or once the bound's relative change between two
    evaluations ``window`` steps apart is at most ``tol``; each step on ``batch_size`` rows."""

    max_iter: int = 1000
    batch_size: int | None = None
    tol: float = 1e-5
    window: int = 10


@dataclass
class Hooks:
    """What a learner adds to the steps (each optional). ``evaluate()`` returns the bound (a scalar
    tensor); without it the mean minus-loss of the last window is used. ``moves()`` runs after each
    evaluation: while it returns True (it changed the clusters, or has yet to judge them) the run
    goes on whatever the bound did, and where it returns ``CONVERGED`` the run has converged (its
    own test, on a less noisy bound); then ``reorganise()``. ``before_step(indices)`` is step 3 of
    the module docstring; ``after_step()`` runs after each step; ``draw()`` gives each step's
    minibatch indices (default: ``minibatch_indices``)."""

    evaluate: callable = None
    before_step: callable = None
    after_step: callable = None
    reorganise: callable = None
    moves: callable = None
    draw: callable = None


def run_svi(program: SVIProgram, data: torch.Tensor, schedule: Schedule, hooks: Hooks | None = None, *,
            clock_start: float | None = None, verbose: bool = False) -> SVIRun:
    """Run ``program``'s steps on ``data`` until ``schedule`` stops them, with a learner's ``hooks``.
    ``run.seconds`` count from ``clock_start`` (a ``time.perf_counter()`` value; default: this call).
    """
    hooks, loss_fn, run = hooks or Hooks(), _loss_function(program.loss), SVIRun()
    validated = is_validation_enabled()
    start, recent = time.perf_counter() if clock_start is None else clock_start, []
    shown = verbose and data_parallel.rank(data_parallel.group_of(data)) == 0  # one bar for all the ranks
    with progress(total=schedule.max_iter, disable=not shown, desc="svi", unit="step") as bar:
        for step in range(schedule.max_iter):
            indices = hooks.draw() if hooks.draw is not None else minibatch_indices(
                data_parallel.rows_here(data), schedule.batch_size, data.device)
            with pyro.validation_enabled(validated and step == 0):
                fixed = hooks.before_step(indices) if hooks.before_step is not None else None
                recent.append(svi_step(program, data, indices, loss_fn=loss_fn,
                                       fixed=fixed if program.loss == "map" else None))
            if hooks.after_step is not None:
                hooks.after_step()
            run.n_iter = step + 1
            if run.n_iter % schedule.window and run.n_iter != schedule.max_iter:
                continue
            bar.update(len(recent))
            _evaluation(run, data, hooks, recent, start)
            recent = []
            bar.set_postfix(elbo=f"{run.elbo_trace[-1]:.6g}")
            unsettled = hooks.moves is not None and hooks.moves()
            if unsettled is CONVERGED:
                run.converged = True
                break
            if len(run.elbo_trace) > 1 and not unsettled:
                before = run.elbo_trace[-2]
                if abs(run.elbo_trace[-1] - before) <= schedule.tol * abs(before):
                    run.converged = True
                    break
            if hooks.reorganise is not None:
                hooks.reorganise()
    return run


def _evaluation(run: SVIRun, data, hooks: Hooks, recent: list, start: float) -> None:
    """The bound after a window of steps (``hooks.evaluate``, else the window's mean minus-loss),
    appended to ``run`` with its time; a FloatingPointError where it is not finite."""
    with torch.no_grad():
        bound = hooks.evaluate() if hooks.evaluate is not None else -data_parallel.weighted_mean(
            [torch.stack(recent).mean()], 1.0, data_parallel.group_of(data))[0] * data.shape[0]
    release(data)  # the pages this window's minibatches touched, when data is a mapped file
    run.elbo_trace.append(float(bound))  # one host sync per window
    if not torch.isfinite(bound):
        raise FloatingPointError(f"the bound is {run.elbo_trace[-1]} after {run.n_iter} steps: the steps "
                                 "diverged; lower the learning rate")
    run.seconds.append(time.perf_counter() - start)
