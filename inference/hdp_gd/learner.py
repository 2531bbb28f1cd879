"""HDP-GD's closed-form learners as loops over ``updates``: batch VI ([HDP-GD] Algorithm 1) to
convergence with merge moves, memoized VI in passes of minibatches (online-vi's fit), and
Algorithm 2's steps over a stream's batch (online-vi's ``partial_fit``). ``HDPGD``
(``bnpzoo.hdp_gd``) checks the input and keeps the result; these take ``Observations`` (rows
sorted by group) and return the global factors."""

from dataclasses import dataclass

import torch
from bnpzoo.progress import progress
from bnpzoo.inference.optim import decaying_step

from bnpzoo.inference.hdp_gd.updates import (Globals, Observations, Prior, batch_iteration, converged, global_bound,
                                             initial_globals, memoized_visit, merge_moves, online_step, saliency_mean)

SALIENCY_SETTLED = 1e-3  # the most a feature's E[eps] may move in a converged iteration or pass (``settled``)
MERGE_CHECKS_PER_PASS = 10  # a stream's batch: merges are tried after at most about this many minibatches a pass


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


def settled(trace: list, tol: float, n: int, g: Globals, previous_saliency: torch.Tensor) -> bool:
    """Converged: the bound moved by at most ``tol`` per row in the last iteration (pass), and no
    feature's E[eps] by more than ``SALIENCY_SETTLED``. The saliencies of irrelevant features drift
    to 0 long after the bound has settled (each row's relevance f and the components' fit of the
    feature pull each other down, a little each iteration): stopped on the bound alone, memoized VI
    left an irrelevant feature's saliency at 0.13 to 0.19 on four of six draws, 0.00 once they
    settle (batch VI held one at 0.56 and 0.90 on two of those draws either way: fixed points)."""
    return converged(trace, tol, n) and float((saliency_mean(g) - previous_saliency).abs().max()) <= SALIENCY_SETTLED


def fit_batch(obs: Observations, prior: Prior, schedule: Schedule, *, max_iter: int, seed: int):
    """Batch VI: iterations of every coordinate update until they settle (``settled``); then merges,
    and on while one is kept (each raises the bound, so the trace never falls). Returns (globals,
    the rows' relevances f at the end, the bound per iteration, iterations, converged)."""
    n = obs.x.shape[0]
    g = initial_globals(obs, schedule.truncation, schedule.group_truncation, prior, n_init=schedule.n_init, seed=seed)
    f = saliency_mean(g).expand_as(obs.x).clone()
    trace, done = [], False
    with progress(total=max_iter, disable=not schedule.verbose, desc="hdp-gd vi", unit="it") as bar:
        for it in range(max_iter):
            previous = saliency_mean(g)
            g, f, value = batch_iteration(obs, g, prior, f)
            trace.append(float(value))  # one host sync an iteration: the convergence test reads it
            bar.update()
            if settled(trace, schedule.tol, n, g, previous):
                g, f, kept = merge_moves(obs, g, prior, f, candidates=schedule.merges)
                if kept:  # the merged state is iterated to convergence again
                    continue
                done = True
                break
    return g, f, trace, it + 1, done


def fit_memoized(obs: Observations, prior: Prior, schedule: Schedule, *, max_passes: int, seed: int):
    """Memoized online VI (Hughes & Sudderth 2013) from a K-means start on a random sample of
    min(N, max(20 K, batch)) rows (counts scaled to the data): fixed minibatches in a random order;
    each visit replaces the batch's sums in the record and the global factors take batch VI's
    updates from the record's totals (``memoized_visit``), exact once every batch has been seen, so
    the fit converges to batch VI's fixed points at a minibatch's cost a step (the record keeps
    each batch's relevances f too, N x D as batch VI's). Converged when a pass settles
    (``settled``, on the memoized bound: the record's row terms and the global terms); then batch
    VI's merges, judged on all the rows, and on while one is kept (the record starts again).
    Returns (globals, the bound per pass, passes, converged)."""
    n, n_groups = obs.x.shape[0], obs.sizes.shape[0]
    generator = torch.Generator().manual_seed(seed)
    sample = torch.randperm(n, generator=generator)[: max(20 * schedule.truncation, schedule.batch_size)]
    g = initial_globals(obs.rows(sample.sort().values.to(obs.x.device)), schedule.truncation,
                        schedule.group_truncation, prior, n_init=schedule.n_init, seed=seed, data_sizes=obs.sizes)
    order = torch.randperm(n, generator=generator).to(obs.x.device)
    # each batch's rows (with their logs) gathered once: a visit would otherwise recompute them
    batches = [obs.rows(order[start : start + schedule.batch_size].sort().values)
               for start in range(0, n, schedule.batch_size)]
    record, totals, trace, done = [None] * len(batches), None, [], False
    with progress(total=max_passes, disable=not schedule.verbose, desc="hdp-gd online-vi", unit="pass") as bar:
        for passes in range(1, max_passes + 1):
            previous = saliency_mean(g)
            for b, batch in enumerate(batches):
                g, record[b], totals = memoized_visit(batch, g, prior, totals, record[b], n_groups)
            trace.append(float(totals["bound"] + global_bound(g, prior)))
            bar.update()
            if settled(trace, schedule.tol, n, g, previous):
                g, _, kept = merge_moves(obs, g, prior, saliency_mean(g).expand_as(obs.x).clone(),
                                         candidates=schedule.merges)
                if kept:
                    record, totals = [None] * len(batches), None
                    continue
                done = True
                break
    return g, trace, passes, done


def online_pass(obs: Observations, g: Globals, prior: Prior, schedule: Schedule, perm: torch.Tensor, step: int,
                estimates: list):
    """One pass of Algorithm 2 over ``obs`` (a stream's batch) in the order ``perm``, the minibatches
    numbered on from ``step``: their bound estimates are appended to ``estimates`` (tensors: no host
    sync in the loop), with merge checks judged on the minibatch. Returns (globals, the last step)."""
    n = obs.x.shape[0]
    every = max(1, -(-n // schedule.batch_size) // MERGE_CHECKS_PER_PASS)
    for start in range(0, n, schedule.batch_size):
        rows = perm[start : start + schedule.batch_size].sort().values  # group order within the batch
        step += 1
        batch = obs.rows(rows)
        g, _, f, estimate = online_step(batch, g, prior, n_total=n, group_sizes=obs.sizes,
                                        zeta=decaying_step(step, schedule.offset, schedule.decay))
        estimates.append(estimate)
        if step % every == 0:
            g, _, _ = merge_moves(batch, g, prior, f, candidates=schedule.merges, scale=n / len(rows))
    return g, step
