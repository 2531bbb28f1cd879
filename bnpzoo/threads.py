"""Threads that degrade gracefully on a shared machine.

The cause, measured (2 cores, digits, 200 iterations; the load one busy process per core): torch's
OpenMP threads spin-wait at every barrier for a thread that another process has descheduled.
Loaded over unloaded wall time, with torch's 2 default threads: vmm 4.3 x, sga 3.7 x,
natgrad-svi 49.7 x; with ``OMP_WAIT_POLICY=PASSIVE`` (threads sleep instead of spinning) 1.9 x
each; with one thread 1.5, 1.7 and 1.5 x. Unloaded, one thread is as fast as two on steps this
small (a minibatch of 1000 x 64 against 50 clusters), and two pay from about 10,000 rows x 50
clusters x 64 features a pass (the measurements: ``benchmarks/reports/speed.md``, "Behind the code").

So bnpzoo does three things:

- ``import bnpzoo`` before torch is loaded sets ``OMP_WAIT_POLICY=PASSIVE`` unless it is set (the
  CLI always imports bnpzoo first). OpenMP reads it once, when torch loads: a program that imports
  torch first should set it in the environment itself;
- a fit whose work per step, rows x clusters x features, is below ``SMALL_WORK`` runs with one
  thread (``fit_threads``), and restores torch's setting afterwards;
- the steps of a fit that work on a few thousand rows at a time (a cluster's k-means for a birth, the
  merge scores, the start's k-means on a sample) run with one thread (``small_work``): with sleeping
  threads each of their small operations pays a wake-up, 0.1 to 0.4 ms against 0.01 ms of work
  (a 2-means update of 1,000 x 32 rows: 0.43 ms with two sleeping threads, 0.012 ms spinning);
  the births of a 20,000 x 32 fit took 0.36 s with two threads, 0.09 s with one.

``BNPZOO_THREADS`` overrides all three: a number fixes the threads of every fit, ``off`` leaves torch's
settings alone (neither the wait policy nor the threads are touched).

Fits in several Python threads (a threaded ``GridSearchCV``, a user's thread pool) take turns:
Pyro's effect handlers, its parameter store, the global generators a fit seeds and torch's thread
setting are all process-wide, so two fits at once would trace each other's sample sites. Each fit
or ``partial_fit`` holds ``FIT_TURN`` throughout, and gets the result it would get alone; torch's
own threads still parallelise each fit, and predictions run concurrently.
"""

import contextlib
import functools
import os
import sys
import threading

SMALL_WORK = 2 * 10**7  # rows x clusters x features a step below which one thread does as well
FIT_TURN = threading.RLock()  # one fit at a time in a process (the module docstring); reentrant: a stream's batches


def prefer_passive_wait() -> None:
    """OMP_WAIT_POLICY=PASSIVE unless set, when torch is not loaded yet (OpenMP reads it then)
    and ``BNPZOO_THREADS`` is not ``off``."""
    if "torch" not in sys.modules and os.environ.get("BNPZOO_THREADS", "").strip().lower() != "off":
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def threads_for(work: float) -> int | None:
    """The threads for a fit of ``work`` (rows x clusters x features a step); None: torch's own."""
    setting = os.environ.get("BNPZOO_THREADS", "auto").strip().lower()
    if setting == "off":
        return None
    if setting != "auto":
        if not setting.isdigit() or int(setting) < 1:
            raise ValueError(f"BNPZOO_THREADS must be 'auto', 'off' or a number >= 1, got {setting!r}")
        return int(setting)
    return 1 if work < SMALL_WORK else None


@contextlib.contextmanager
def torch_threads(threads: int | None):
    """Run the block with ``threads`` torch threads (None: as they are), then restore the setting."""
    import torch

    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def small_work():
    """One torch thread for the block (the module docstring), then the setting before it; where
    ``BNPZOO_THREADS`` is set, its setting throughout."""
    auto = os.environ.get("BNPZOO_THREADS", "auto").strip().lower() == "auto"
    return torch_threads(1 if auto else None)


def fit_threads(method):
    """Decorate an estimator's ``fit`` / ``partial_fit(X, ...)``: it runs in its turn (``FIT_TURN``)
    with ``threads_for`` the estimator's ``_step_work(X)`` threads, and torch's setting is restored
    afterwards."""

    @functools.wraps(method)
    def fit(self, X, *args, **kwargs):
        import torch

        self._validate_params()  # before ``_step_work`` reads them (truncation="50": a TypeError there)
        with FIT_TURN, torch_threads(threads_for(self._step_work(X))):
            return method(self, X, *args, **kwargs)

    return fit
