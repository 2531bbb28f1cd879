"""HDP-GD's closed-form learners as loops over ``updates``: batch VI ([HDP-GD] Algorithm 1) to
convergence with merge moves, and online VI (Algorithm 2) in passes of minibatches. ``HDPGD``
(``bnpzoo.hdp_gd``) checks the input and keeps the result; these take ``Observations`` (rows
sorted by group) and return the global factors."""

from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from bnpzoo.inference.hdp_gd.updates import (Globals, Observations, Prior, batch_iteration, converged,
                                             initial_globals, merge_moves, online_step, saliency_mean)

MERGE_CHECKS_PER_PASS = 10  # online VI: merges are tried after at most about this many minibatches a pass


@dataclass(frozen=True)
class Schedule:
    """What the loops are told: the truncations (K, T), K-means restarts of the start, merge
    candidates a check (0: none), batch VI's tolerance (per observation), online VI's minibatch
    and step zeta_r = (offset + r)^(-decay) (eq. (32)), and whether to show a progress bar."""
    truncation: int
    group_truncation: int
    n_init: int
    merges: int
    tol: float
    batch_size: int
    offset: float
    decay: float
    verbose: bool


def fit_batch(obs: Observations, prior: Prior, schedule: Schedule, *, max_iter: int, seed: int):
    """Batch VI: iterations of every coordinate update until the bound changes by less than ``tol``
    per observation; then merges, and on while one is kept (each raises the bound, so the trace
    never falls). Returns (globals, the rows' relevances f at the end, the bound per iteration,
    iterations, converged)."""
    n = obs.x.shape[0]
    g = initial_globals(obs, schedule.truncation, schedule.group_truncation, prior, n_init=schedule.n_init, seed=seed)
    f = saliency_mean(g).expand_as(obs.x).clone()
    trace, done = [], False
    with tqdm(total=max_iter, disable=not schedule.verbose, desc="hdp-gd vi", unit="it") as bar:
        for it in range(max_iter):
            g, f, value, _ = batch_iteration(obs, g, prior, f)
            trace.append(float(value))  # one host sync an iteration: the convergence test reads it
            bar.update()
            if converged(trace, schedule.tol, n):
                g, f, kept = merge_moves(obs, g, prior, f, candidates=schedule.merges)
                if kept:  # the merged state is iterated to convergence again
                    continue
                done = True
                break
    return g, f, trace, it + 1, done


def fit_online(obs: Observations, prior: Prior, schedule: Schedule, *, passes: int, seed: int):
    """Online VI from a K-means start on a random sample of min(N, max(20 K, batch)) rows (counts
    scaled to the data), ``passes`` passes in random orders. Returns (globals, each minibatch's
    bound estimate, steps)."""
    n = obs.x.shape[0]
    generator = torch.Generator().manual_seed(seed)
    sample = torch.randperm(n, generator=generator)[: max(20 * schedule.truncation, schedule.batch_size)]
    g = initial_globals(obs.rows(sample.sort().values.to(obs.x.device)), schedule.truncation,
                        schedule.group_truncation, prior, n_init=schedule.n_init, seed=seed, data_sizes=obs.sizes)
    estimates, step = [], 0
    with tqdm(total=passes * -(-n // schedule.batch_size), disable=not schedule.verbose, desc="hdp-gd online-vi",
              unit="batch") as bar:
        for done in range(passes):
            perm = torch.randperm(n, generator=generator).to(obs.x.device)
            # the last of several passes refines without merges: a merge judged on a minibatch there
            # would have no pass left to correct it (benchmarks/reports/hdp_gd.md)
            merges = passes == 1 or done < passes - 1
            g, step = online_pass(obs, g, prior, schedule, perm, step, estimates, bar=bar, merges=merges)
    return g, torch.stack(estimates).tolist(), step


def online_pass(obs: Observations, g: Globals, prior: Prior, schedule: Schedule, perm: torch.Tensor, step: int,
                estimates: list, *, bar=None, merges: bool = True):
    """One pass of Algorithm 2 over ``obs`` in the order ``perm``, the minibatches numbered on from
    ``step``: their bound estimates are appended to ``estimates`` (tensors: no host sync in the
    loop); merge checks where ``merges``.
    Returns (globals, the last step)."""
    n = obs.x.shape[0]
    every = max(1, -(-n // schedule.batch_size) // MERGE_CHECKS_PER_PASS)
    for start in range(0, n, schedule.batch_size):
        rows = perm[start : start + schedule.batch_size].sort().values  # group order within the batch
        step += 1
        batch = obs.rows(rows)
        g, _, f, estimate = online_step(batch, g, prior, n_total=n, group_sizes=obs.sizes, step=step,
                                        offset=schedule.offset, decay=schedule.decay)
        estimates.append(estimate)
        if merges and step % every == 0:
            g, _, _ = merge_moves(batch, g, prior, f, candidates=schedule.merges, scale=n / len(rows))
        if bar is not None:
            bar.update()
    return g, step
