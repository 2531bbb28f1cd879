"""One rank of the data-parallel test (``test_data_parallel.py``), launched as ``torchrun`` would:
RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in the environment.

    python data_parallel_worker.py DATA.npy TABLES.pt OUT.pt

fits every SVI learner on this rank's rows of the memory-mapped DATA with ``data_parallel=True``,
its minibatches, evaluation rows and K-means sample fixed by TABLES (``fixed_draws``), and a stream
of two batches by ``partial_fit`` whose sizes differ between the ranks (random draws, ``"stream"``),
and saves the fitted parameters to OUT.
"""

import contextlib
import sys
from unittest import mock

import numpy as np
import torch

import bnpzoo
from bnpzoo.mixture import StickMixture
from bnpzoo.inference.stick_mixture.session import LEARNERS

SETTINGS = dict(truncation=10, max_iter=60, random_state=3)


@contextlib.contextmanager
def fixed_draws(tables):
    """The learner's random rows replaced by ``tables``: "steps" (one row of indices a step),
    "evaluation" and "start" (the K-means sample); in one process, too, without the births and merges
    a data-parallel fit does not make."""
    steps = iter(tables["steps"])
    with mock.patch("bnpzoo.inference.svi.minibatch_indices", lambda n, size, device: next(steps)), \
            mock.patch("bnpzoo.inference.stick_mixture.session.evaluation_indices",
                       lambda n, size, device: tables["evaluation"]), \
            mock.patch.object(StickMixture, "_start_sample", lambda self, x, floor: x[tables["start"]]), \
            mock.patch.object(StickMixture, "_grows", lambda self: False):  # the steps of a data-parallel fit
        yield


def fit_all(x, tables, **settings) -> dict:
    """{learner: the fitted means, weights, bound trace and counts} for every SVI learner, and
    natural-gradient SVI for each learned covariance (with the covariances)."""
    runs = [(learner, {"covariance": "fixed"}) for learner in LEARNERS]  # a data-parallel fit's default
    runs += [(f"natgrad-svi {c}", {"inference": "natgrad-svi", "covariance": c}) for c in ("full", "diag", "spherical")]
    out = {}
    for name, arguments in runs:
        with fixed_draws(tables):
            est = bnpzoo.DPGMM(**{"inference": name, **arguments}, **SETTINGS, **settings).fit(x)
        out[name] = {"means": torch.as_tensor(est.means_), "weights": torch.as_tensor(est.weights_),
                     "counts": torch.as_tensor(est.counts_),
                     "elbo": torch.tensor(est.elbo_trace_)}
        if est.components_:
            out[name]["covariances"] = torch.as_tensor(est.covariances_)
    return out


if __name__ == "__main__":
    data, tables, out = sys.argv[1:]
    x = bnpzoo.rank_rows(np.load(data, mmap_mode="r"))
    rank = torch.distributed.get_rank()
    fits = fit_all(x, torch.load(tables)[rank], data_parallel=True)
    stream = bnpzoo.PYPGGM(inference="sga-momentum", batch_size=100, data_parallel=True, **SETTINGS)
    for batch in (x[:400 + 300 * rank], x[1000:]):  # 4 and 7 steps, then 5: every rank takes the most
        stream.partial_fit(batch)
    fits["stream"] = {"means": torch.as_tensor(stream.means_), "steps": torch.tensor(stream.n_iter_)}
    torch.save(fits, out)
    torch.distributed.destroy_process_group()
