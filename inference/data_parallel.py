"""Data-parallel SVI over a ``torch.distributed`` process group: each rank holds a shard of the rows.

Every rank draws its minibatch from its own rows, and the ranks then act as one process whose
minibatch is the union of theirs. With M_r rows on rank r and M = sum_r M_r, the loss of the union
(the learner's 1 / N scaling, ``inference.svi``) is

    (1/N) [(N / M) sum_{n in union} l_n + ln p(theta)] = sum_r (M_r / M) L_r,
    L_r = (1/N) [(N / M_r) sum_{n on r} l_n + ln p(theta)],

the loss each rank computes when its program sees the data set's N (``Shard``). So the union's
gradient is the M_r-weighted mean of the ranks' gradients (``average_gradients``), and so is every
other minibatch mean a learner takes: the per-sample Fisher of SGA+F ([DPM-SGA] eq. (9)), and
natural-gradient SVI's target theta_hat ([PYPM-sVMM] eq. (10)), which is affine in the minibatch's
statistics (its surrogate gradient is theta - theta_hat, so averaging the gradients averages it).
The evaluation bound and its counts are sums over the ranks' evaluation rows (``all_sum``). Every
rank then applies the same step to the same parameters and prunes the same clusters: they never
diverge, and rank 0's parameters are the fit.

``group`` is None outside a data-parallel fit; every function below is then the identity, so the
one-process learners run the same code with no collective.
"""

import atexit
import os

import torch
import torch.distributed as dist

# what ``torchrun`` sets in each process it launches
LAUNCHER_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def world_group(device=None):
    """The default process group for a data-parallel fit: initialised from the launcher's
    environment (gloo on CPU, nccl for CUDA) when this process was started by ``torchrun`` and
    no group exists yet. ValueError when there is none to be had."""
    if not dist.is_available():
        raise ValueError("data_parallel=True needs torch.distributed, which this build of torch lacks")
    if not dist.is_initialized():
        if not launched():
            raise ValueError("data_parallel=True needs a torch.distributed process group: start the processes "
                             "with torchrun, or call torch.distributed.init_process_group first")
        device = rank_device(device)
        if device is not None and device.type == "cuda":
            torch.cuda.set_device(device)  # nccl's collectives run on this rank's GPU
            dist.init_process_group(backend="nccl", device_id=device)
        else:
            dist.init_process_group(backend="gloo")
        _OWN_GROUP[0] = True
    return dist.group.WORLD


_OWN_GROUP = [False]  # whether ``world_group`` initialised the default group


@atexit.register
def close_own_group() -> None:
    """Destroy the default process group if ``world_group`` made it (the caller's stays open). Also
    at exit, while the interpreter is whole: a script that fits with ``bnpzoo.rank_rows`` under
    torchrun never sees the group, and torch asks that every group be destroyed before the process
    ends (its gloo and nccl backends may abort or warn in their destructors otherwise)."""
    if _OWN_GROUP[0] and dist.is_initialized():
        dist.destroy_process_group()
    _OWN_GROUP[0] = False


def rank_device(device) -> torch.device | None:
    """``device``, with a CUDA device that names no index made this process's own GPU
    (``cuda:$LOCAL_RANK`` under torchrun)."""
    if device is None:
        return None
    device = torch.device(device)
    if device.type == "cuda" and device.index is None and "LOCAL_RANK" in os.environ:
        return torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    return device


def launched() -> bool:
    """Whether ``torchrun`` (or another launcher that sets its variables) started this process."""
    return all(name in os.environ for name in LAUNCHER_ENV)


def rank(group) -> int:
    return 0 if group is None else dist.get_rank(group)


def size(group) -> int:
    return 1 if group is None else dist.get_world_size(group)


def own_rows(n: int, group) -> slice:
    """This rank's contiguous share of n rows (the ranks' shares differ by at most one row)."""
    r, w = rank(group), size(group)
    return slice(r * n // w, (r + 1) * n // w)


def rank_rows(X):
    """This process's contiguous share of ``X``'s rows among the ranks of the default process group
    (from ``torchrun``'s environment if none exists yet): a view, so a memory-mapped X stays mapped
    and each rank reads only its own rows. What each rank passes to ``fit(X)`` with
    ``data_parallel=True``."""
    return X[own_rows(len(X), world_group())]


def all_sum(tensors, group) -> list:
    """The sums over the ranks of ``tensors`` (any shapes and real dtypes), in one all-reduce
    (in float64, so integer counts stay exact); each comes back in its own dtype."""
    if group is None:
        return list(tensors)
    flat = torch.cat([t.reshape(-1).to(_device(group), torch.float64) for t in tensors])
    dist.all_reduce(flat, group=group)
    out, start = [], 0
    for t in tensors:
        out.append(flat[start:start + t.numel()].reshape(t.shape).to(t.device, t.dtype))
        start += t.numel()
    return out


def weighted_mean(tensors, weight: float, group) -> list:
    """sum_r w_r t_r / sum_r w_r over the ranks, for each of ``tensors`` (the union's mean of
    per-row means, w_r the rows behind each rank's)."""
    if group is None:
        return list(tensors)
    # in float64: a float32 t * w would round, and one rank's mean would not come back as itself
    *sums, total = all_sum([t.to(torch.float64) * weight for t in tensors] + [torch.tensor(float(weight))], group)
    return [(s / total).to(t.dtype) for s, t in zip(sums, tensors)]


def average_gradients(params, weight: float, group) -> None:
    """Replace each parameter's gradient by the ``weight``-weighted mean over the ranks (the
    module docstring). ``params`` in the same order on every rank; a missing gradient counts as 0."""
    if group is None:
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    for p, g in zip(params, weighted_mean(grads, weight, group)):
        p.grad = g


def largest(value: float, group) -> float:
    """The largest of the ranks' values."""
    if group is None:
        return value
    t = torch.tensor([float(value)], dtype=torch.float64, device=_device(group))
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return float(t)


def _device(group) -> torch.device:
    """Where the group's collectives take their tensors: this rank's GPU for nccl, else the CPU."""
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend(group) == "nccl" \
        else torch.device("cpu")


def gather_rows(x: torch.Tensor, group) -> torch.Tensor:
    """The ranks' row blocks stacked in rank order, on every rank (blocks may differ in length)."""
    if group is None:
        return x
    blocks = [None] * size(group)
    dist.all_gather_object(blocks, x.cpu(), group=group)
    return torch.cat(blocks).to(x.device)


def from_first(value, group):
    """Rank 0's ``value`` (any picklable object) on every rank."""
    if group is None:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0, group=group)
    return box[0]


class Shard:
    """This rank's rows, seen by a program as the whole data set: ``shape[0]`` is the data set's
    N (the plate's size, so Pyro scales the likelihood by N / M), and ``data[idx]`` indexes this
    rank's own rows (0 <= idx < ``rows_here``). ``group`` is the process group of the fit."""

    def __init__(self, rows, group):
        self.rows, self.group, self.rows_here = rows, group, rows.shape[0]
        (n,) = all_sum([torch.tensor(float(rows.shape[0]))], group)
        self.shape = torch.Size((int(n), *rows.shape[1:]))
        self.dtype, self.device = rows.dtype, rows.device

    def __getitem__(self, index):
        return self.rows[index]


def shard(rows, group):
    """``rows`` as the data set of a fit over ``group``: a ``Shard``, or rows itself without one."""
    return rows if group is None else Shard(rows, group)


def group_of(data):
    """The process group a learner's data belongs to (None: one process)."""
    return getattr(data, "group", None)


def rows_here(data) -> int:
    """The rows a minibatch can be drawn from in this process."""
    return data.rows_here if isinstance(data, Shard) else data.shape[0]
