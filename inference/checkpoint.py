"""Checkpoints of a running Markov chain: a folder with one file per chain, rewritten every few
sweeps, from which a stopped run resumes and ends exactly where the uninterrupted run would.

A chain's file holds what its next sweep depends on and what it has returned so far: the sampler's
state, the summaries of every sample so far (MCMC collects them again on resume), and torch's,
numpy's and Python's generator states (every draw of the sampler comes from these; the compiled
steps seed numba's generator from torch's). Files are weights-only (tensors, numbers, strings),
written to a temporary name and renamed, so a run killed while writing leaves the last whole one.
A fingerprint of the data and the settings guards against resuming a different fit.

``CheckpointedChain`` is what a sampler's ``MCMCKernel`` adds to take part: it loads the chain's
file at the start, hands MCMC the summaries the chain returned before a stop, and writes the file
as the chain sweeps on and when it ends. ``chain_checkpoint`` is the estimators' way to make one.
"""

import dataclasses
import hashlib
import os
from pathlib import Path

import torch

from bnpzoo.ops import get_rng_state, set_rng_state

FORMAT = "bnpzoo-chain-checkpoint-1"


def fingerprint(*parts) -> str:
    """A digest of tensors, dataclasses of them (field by field) and plain values."""
    digest = hashlib.sha256()
    for part in parts:
        if dataclasses.is_dataclass(part):
            digest.update(fingerprint(*(getattr(part, f.name) for f in dataclasses.fields(part)
                                        if f.metadata.get("fingerprint", True))).encode())
        elif isinstance(part, torch.Tensor):
            digest.update(f"{part.dtype}{tuple(part.shape)}".encode())
            digest.update(part.detach().cpu().contiguous().numpy().tobytes())
        else:
            digest.update(repr(part).encode())
    return digest.hexdigest()


@dataclasses.dataclass(frozen=True)
class ChainCheckpoint:
    """``folder`` of chain files; a chain writes once ``every`` sweeps have passed since its last
    write, and when it ends; ``steps``: samples per chain of this run (a file with more is refused)."""

    folder: Path
    every: int
    fingerprint: str
    steps: int
    prefix: str = "chain"  # the files' names: prefix-<chain>.pt

    def __post_init__(self):
        if Path(self.folder).exists() and not Path(self.folder).is_dir():
            raise ValueError(f"checkpoint {self.folder} is a file; give a folder")
        try:  # a folder that cannot be made fails now, not after the first sweeps
            Path(self.folder).mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ValueError(f"cannot make the checkpoint folder {self.folder}: {err.strerror}") from None

    def path(self, chain: int) -> Path:
        return Path(self.folder) / f"{self.prefix}-{chain}.pt"

    def load(self, chain: int):
        """(state fields, summaries so far as a list of dicts), with the generators set to where the
        chain stopped; None when the chain has no file yet."""
        path = self.path(chain)
        if not path.exists():
            return None
        try:
            saved = torch.load(path, weights_only=True)
            assert isinstance(saved, dict) and saved.get("format") == FORMAT
        except Exception:
            raise ValueError(f"{path} is not a bnpzoo chain checkpoint; use another checkpoint folder") from None
        if saved["fingerprint"] != self.fingerprint:
            raise ValueError(f"{path} was written by a fit with other data or settings; use another checkpoint "
                             "folder, or delete this one to start over")
        count = len(saved["summaries"])
        if count > self.steps:
            raise ValueError(f"{path} holds {count} samples of chain {chain}, more than this fit's warmup + max_iter = "
                             f"{self.steps}; raise max_iter, or use another checkpoint folder")
        set_rng_state(saved["rng"])
        return saved["state"], saved["summaries"]

    def save(self, chain: int, state: dict, summaries: list) -> None:
        path = self.path(chain)
        record = {"format": FORMAT, "fingerprint": self.fingerprint, "state": state, "summaries": summaries,
                  "rng": get_rng_state()}
        partial = path.with_name(path.name + ".partial")
        torch.save(record, partial)
        os.replace(partial, path)


def chain_checkpoint(folder, every: int, steps: int, *key, prefix: str = "chain") -> ChainCheckpoint | None:
    """The chains' checkpoint in ``folder`` (None: no checkpoints), keyed to ``key``: the data and
    every setting a chain's draws depend on."""
    return None if folder is None else ChainCheckpoint(Path(folder), every, fingerprint(*key), steps, prefix)


class CheckpointedChain:
    """A chain's checkpoint bookkeeping, mixed into a sampler's ``MCMCKernel``. The kernel holds
    ``checkpoint`` (None: none), ``_chain`` (its index), ``_t`` (the samples it has returned) and
    ``thin`` (sweeps per sample), and gives ``_checkpoint_state`` (its state as tensors and numbers).
    In ``setup`` it calls ``resumed``; in ``sample``, ``replayed`` first and, after a new sample,
    ``recorded``; in ``cleanup``, ``ended``."""

    checkpoint: ChainCheckpoint | None = None
    thin = 1
    _replayed = _saved_at = 0

    def resumed(self):
        """The saved state of this chain, with the generators set where it stopped; None: no file."""
        saved = None if self.checkpoint is None else self.checkpoint.load(self._chain)
        self._summaries = [] if saved is None else saved[1]
        self._replayed = self._saved_at = len(self._summaries)
        return None if saved is None else saved[0]

    def replayed(self):
        """The summary this sample returned before the stop (``_t`` counts it); None: sweep on."""
        if self._t >= self._replayed:
            return None
        self._t += 1
        return self._summaries[self._t - 1]

    def recorded(self, summary) -> None:
        """A new sample's ``summary`` (``_t`` counts it): kept, and the file written once ``every``
        sweeps have passed since the last write (MCMC keeps the run's samples; a checkpoint needs its own)."""
        if self.checkpoint is None:
            return
        self._summaries.append(summary)
        if (self._t - self._saved_at) * self.thin >= self.checkpoint.every:
            self._save()

    def ended(self) -> None:
        """The chain's end: its last sweeps written."""
        if self.checkpoint is not None and self._t > self._saved_at:
            self._save()

    def _save(self) -> None:
        self.checkpoint.save(self._chain, self._checkpoint_state(), self._summaries)
        self._saved_at = self._t
