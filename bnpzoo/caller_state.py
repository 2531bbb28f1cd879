"""A fit leaves the caller's process as it found it: torch's, CUDA's (where started), numpy's global
and Python's random generators, Pyro's global parameter store, the caller's Pyro handlers, and
torch's grad mode.

The learners seed and draw from the global generators (Pyro samples from torch's) and the SVI ones
keep their parameters in Pyro's store, so ``keeps_caller_state`` saves all of it before ``fit`` or
``partial_fit``, hands the fit an empty store, and puts the caller's back afterwards. A fit with
``random_state=None`` takes one draw from the caller's torch generator as its seed (so it is
reproducible under the caller's ``torch.manual_seed``, and two such fits differ); the caller's
generators are then where that one draw left them. Fits run with gradients on, inside
``torch.no_grad()`` or ``torch.inference_mode()`` too, with the caller's Pyro handlers muted
(``block_messengers``, which costs nothing where there are none, where a ``poutine.block`` on top
made ``vi`` 10 % slower): a fit inside the caller's ``pyro.poutine.trace()`` (or any handler) neither
records the learners' internal sites there nor collides with them on site names.
"""

import contextlib
import functools
import random

import numpy as np
import pyro
import torch
from pyro.poutine.messenger import block_messengers


def _generators() -> dict:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "random": random.getstate(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None}


def _restore(saved: dict) -> None:
    torch.set_rng_state(saved["torch"])
    np.random.set_state(saved["numpy"])
    random.setstate(saved["random"])
    if saved["cuda"] is not None:
        torch.cuda.set_rng_state_all(saved["cuda"])


@contextlib.contextmanager
def caller_state_kept(random_state):
    """Run a fit with ``random_state`` (None: a seed drawn from the caller's torch generator) and
    leave the generators, Pyro's store, its handlers and the grad mode as they were (the module docstring)."""
    seed = int(torch.randint(2**32, ())) if random_state is None else None
    saved, store = _generators(), pyro.get_param_store()
    params = store.get_state()
    store.clear()
    try:
        if seed is not None:
            pyro.set_rng_seed(seed)
        with torch.inference_mode(False), torch.enable_grad(), block_messengers(lambda handler: True):
            yield
    finally:
        store.clear()
        store.set_state(params)
        _restore(saved)


def keeps_caller_state(method):
    """Decorate an estimator's ``fit`` / ``partial_fit``: it runs in ``caller_state_kept``."""

    @functools.wraps(method)
    def fit(self, *args, **kwargs):
        with caller_state_kept(self.random_state):
            return method(self, *args, **kwargs)

    return fit
