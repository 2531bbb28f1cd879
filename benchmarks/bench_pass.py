"""DPGMM's default against scikit-learn's BGM full and against a plain torch EM pass, same run.

Data: ``gaussians`` (20 clusters in 32-D with random covariances; sizes from a Dirichlet(2), axes
random, spreads 0.2 to 2 per axis, means N(0, 3^2)), a generator no default was chosen on. Columns:

- ``DPGMM()`` (its default: full covariances, vmm with births, merges and memoized batches): the
  first fit of the process (compiles and warms up) and, where that took under a minute, the second;
  iterations, clusters, NMI;
- the plain pass: one full-covariance EM pass over every row as a short torch program would write it
  (all clusters' log-densities from one product of the rows with the stacked whitening factors, a
  softmax, the counts, sums and scatter as products; no host synchronisation), timed over
  ``--passes`` passes after one warm-up; "passes" is the default's second fit in such passes;
- BGM full (``n_components=20``, Dirichlet-process prior) with one BLAS thread and with its default
  threads (``threadpoolctl``), up to ``--bgm-max`` rows: ours over BGM's best.

A second generator, ``--generator separated`` (``separated``): clusters far apart, on which BGM
converges in a few iterations (4 at 20,000 rows), the peer's best case.

Usage: python benchmarks/bench_pass.py [--sizes 20000,100000,1000000] [--device cuda] [--bgm-max 100000]
[--profile ROWS] [--generator separated] [--seed S]
"""

import argparse
import math
import os
import platform
import time
import warnings

import bnpzoo  # noqa: F401  # first, as in a user's script: torch loads with bnpzoo's wait policy (threads.py)
import numpy as np
import torch

from bnpzoo import DPGMM
from bnpzoo.metrics import nmi


def gaussians(n, d=32, k=20, seed=0):
    """(X float32 (n, d), labels) of the module docstring's generator."""
    rng = np.random.default_rng(seed)
    sizes = rng.multinomial(n, rng.dirichlet(np.full(k, 2.0)))
    x = np.empty((n, d), dtype=np.float32)
    start = 0
    for size in sizes:
        axes, _ = np.linalg.qr(rng.normal(size=(d, d)))
        root = axes * np.exp(rng.uniform(math.log(0.2), math.log(2.0), d))
        x[start:start + size] = rng.normal(0, 3, d) + rng.normal(size=(size, d)) @ root.T
        start += size
    return x, np.repeat(np.arange(k), sizes)


def separated(n, d=32, k=20, seed=0):
    """(X float32 (n, d), labels): ``--generator separated``, bench_families' random-covariance
    clusters (each x = mu + A e, A a random d x d matrix times a spread from 0.3 to 3, means
    N(0, 8^2)), k of equal expected size: far apart, so that BGM converges in a few iterations."""
    from bench_families import random_covariance_clusters

    x, labels = random_covariance_clusters(seed, d, k, n)
    return x.astype(np.float32), labels


GENERATORS = {"gaussians": gaussians, "separated": separated}


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def plain_pass(x, means, factors, log_weights, block):
    """One EM pass: responsibilities, then N_k, S_k and Q_k, block by block of ``block`` rows."""
    k, d = means.shape
    stacked = factors.transpose(0, 1).reshape(d, k * d)
    shift = torch.einsum("kd,kde->ke", means, factors).reshape(k * d)
    bias = log_weights + factors.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    counts, sums = x.new_zeros(k), x.new_zeros(k, d)
    scatter = x.new_zeros(k * d, d)
    for start in range(0, x.shape[0], block):
        rows = x[start:start + block]
        table = torch.addmm(shift, rows, stacked, beta=-1).view(-1, k, d).pow_(2).sum(-1).mul_(-0.5).add_(bias)
        r = torch.softmax(table, 1)
        counts += r.sum(0)
        sums += r.T @ rows
        scatter += (r[:, :, None] * rows[:, None, :]).reshape(-1, k * d).T @ rows
    return counts, sums, scatter


def time_plain(x, labels, passes, device):
    """Seconds of one plain pass, its factors taken from the true clusters' moments."""
    k = int(labels.max()) + 1
    onehot = torch.nn.functional.one_hot(torch.as_tensor(labels, device=device), k).to(x.dtype)
    counts = onehot.sum(0)
    means = (onehot.T @ x) / counts[:, None]
    centred = [x[onehot[:, j] > 0] - means[j] for j in range(k)]
    covariances = torch.stack([c.T @ c / c.shape[0] for c in centred])
    factors = torch.linalg.cholesky(torch.linalg.inv(covariances.double())).to(x.dtype)  # ill-conditioned A
    log_weights = (counts / counts.sum()).log()
    block = max(1, (1 << (26 if device.type == "cuda" else 20)) // (k * x.shape[1]))  # 256 MiB tables on a GPU
    plain_pass(x, means, factors, log_weights, block)
    synchronize(device)
    start = time.perf_counter()
    for _ in range(passes):
        plain_pass(x, means, factors, log_weights, block)
    synchronize(device)
    return (time.perf_counter() - start) / passes


def time_default(x_host, device):
    synchronize(device)
    start = time.perf_counter()
    fitted = DPGMM(random_state=0, device=device).fit(x_host)
    synchronize(device)
    return fitted, time.perf_counter() - start


def time_bgm(x, threads):
    from sklearn.mixture import BayesianGaussianMixture
    from threadpoolctl import threadpool_limits

    with threadpool_limits(threads):
        start = time.perf_counter()
        fitted = BayesianGaussianMixture(n_components=20, covariance_type="full", random_state=0,
                                         weight_concentration_prior_type="dirichlet_process").fit(x)
        return fitted, time.perf_counter() - start


def profile(n, seed, device, generator=gaussians):
    """torch.profiler over one default fit of n rows (after a warm-up fit): the operators by time
    and the host synchronisations (reads of a device value: ``aten::_local_scalar_dense``, copies to
    the host), per iteration."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    x_host, _ = generator(n, seed=seed)
    time_default(x_host, device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with torch_profile(activities=activities) as prof:
        fitted, seconds = time_default(x_host, device)
    events = prof.key_averages()
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(f"\nprofile of one fit of {n:,} rows: {seconds:.2f} s (under the profiler), {fitted.n_iter_} iterations")
    print(events.table(sort_by=key, row_limit=20))
    syncs = sum(e.count for e in events if e.key in ("aten::_local_scalar_dense", "cudaStreamSynchronize",
                                                      "cudaDeviceSynchronize"))
    copies = sum(e.count for e in events if e.key == "aten::_to_copy")
    print(f"host synchronisations {syncs} ({syncs / max(fitted.n_iter_, 1):.0f} an iteration), copies {copies}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,100000,1000000")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bgm-max", type=int, default=100_000, help="BGM on sizes up to this many rows")
    parser.add_argument("--passes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--generator", choices=sorted(GENERATORS), default="gaussians")
    parser.add_argument("--profile", type=int, default=0, help="then profile one fit of this many rows")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else (platform.processor() or platform.machine())
    print(f"{name}, {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, load average {os.getloadavg()[0]:.1f} at the start, "
          f"{args.generator}, seed {args.seed}", flush=True)
    print("| rows | DPGMM() first fit s | second fit s | iterations | clusters | NMI | plain pass s | passes "
          "| BGM full 1 thread s | BGM default threads s | BGM NMI | ours / BGM's best |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        x_host, labels = GENERATORS[args.generator](n, seed=args.seed)
        x = torch.as_tensor(x_host, device=device)
        plain = time_plain(x, labels, args.passes, device)
        fitted, first_seconds = time_default(x_host, device)
        seconds = None
        if first_seconds < 60:  # a second fit where the first was short: the first compiles and warms up
            fitted, seconds = time_default(x_host, device)
        score = nmi(labels, fitted.predict(x_host))
        last = first_seconds if seconds is None else seconds
        cells = [f"{n:,}", f"{first_seconds:.2f}", "" if seconds is None else f"{seconds:.2f}", str(fitted.n_iter_),
                 str(fitted.n_clusters_), f"{score:.3f}", f"{plain:.4f}", f"{last / plain:.0f}"]
        if n <= args.bgm_max and device.type == "cpu":
            one, one_seconds = time_bgm(x_host, 1)
            _, many_seconds = time_bgm(x_host, None)
            cells += [f"{one_seconds:.2f}", f"{many_seconds:.2f}", f"{nmi(labels, one.predict(x_host)):.3f}",
                      f"{last / min(one_seconds, many_seconds):.2f}"]
        else:
            cells += ["", "", "", ""]
        print("| " + " | ".join(cells) + " |", flush=True)
        del x
    if args.profile:
        profile(args.profile, args.seed, device, GENERATORS[args.generator])


if __name__ == "__main__":
    main()
