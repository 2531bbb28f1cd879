"""Data in a memory-mapped file (``np.load(path, mmap_mode="r")``), fitted without holding it.

A fit reads such data in place, never copying it whole. The operating system would still count
every page a pass touches in the process's resident memory, up to the whole file, until memory runs
short. So:

- passes over the rows (``passes``) hand each block's pages back when they are done with it
  (``madvise(MADV_DONTNEED)``: the pages leave the process, the file's data stays in the page
  cache, and reading them again costs a page fault, not a disk read);
- minibatches of random rows (``take``, ``FileRows``) are read from the file with ``os.pread``,
  not through the map: a page fault maps a whole page-cache folio, and on Linux 6.18 with ext4
  those are up to 2 MB, so 1,000 random rows of 256 bytes mapped 1.4 GB.
"""

import mmap
import os

import numpy as np
import torch

from bnpzoo.ops import row_blocks


def _owner(arr: np.ndarray) -> np.memmap | None:
    """The np.memmap under a numpy array (itself, or the one it views) whose map is shared with its
    file (modes r, r+, w+), or None: a copy-on-write map ("c") may differ from the file, and handing
    its pages back would drop the caller's changes."""
    while arr is not None:
        if isinstance(arr, np.memmap) and isinstance(getattr(arr, "_mmap", None), mmap.mmap):
            return arr if arr.mode != "c" and arr.filename else None
        arr = arr.base if isinstance(arr.base, np.ndarray) else None
    return None


def attach(t: torch.Tensor, arr: np.ndarray) -> torch.Tensor:
    """Mark ``t`` (a tensor sharing ``arr``'s memory) as read from ``arr``'s mapped file, if it is:
    ``t._mapped`` = (the mmap, t's byte offset in it, its length), and for a C-contiguous t
    ``t._file`` = (path, t's byte offset in the file)."""
    owner = _owner(arr)
    if owner is None or not hasattr(mmap, "MADV_DONTNEED"):
        return t
    mapping = owner._mmap
    start = np.frombuffer(mapping, np.uint8).__array_interface__["data"][0]
    offset = arr.__array_interface__["data"][0] - start
    t._mapped = (mapping, offset, len(mapping))
    if t.is_contiguous():
        mapped_from = owner.offset - owner.offset % mmap.ALLOCATIONGRANULARITY  # where np.memmap's map starts
        t._file = (owner.filename, mapped_from + offset)
    return t


def release(x: torch.Tensor, rows: slice | None = None) -> None:
    """Hand back the pages of ``x[rows]`` (all of x when None, or when x is not C-contiguous)."""
    if not hasattr(x, "_mapped"):
        return
    mapping, offset, size = x._mapped
    first, last = 0, size
    if rows is not None and x.is_contiguous():
        row_bytes = x.shape[1] * x.element_size()
        first = offset + rows.start * row_bytes
        last = min(size, offset + rows.stop * row_bytes)
        first -= first % mmap.PAGESIZE
    mapping.madvise(mmap.MADV_DONTNEED, first, last - first)


READ_ROWS = 65_536  # random rows read one by one from the file at most; beyond, through the map


class FileRows:
    """A mapped tensor's rows, read from its file by index: what the SVI learners' programs and
    hooks index (``data[idx]``, ``data.shape``, ``data.dtype``, ``data.device``) in place of x. A
    program of one's own (``MixtureSVI``) that uses more of ``data`` than these fits arrays in
    memory only."""

    def __init__(self, x: torch.Tensor):
        self.x, self.shape, self.dtype, self.device = x, x.shape, x.dtype, x.device
        path, self.offset = x._file
        self.row_bytes = x.shape[1] * x.element_size()
        self.fd = os.open(path, os.O_RDONLY)
        self._last = (None, None)  # (index, rows): a step's hook and its program index the same minibatch

    def __getitem__(self, index):
        if index is self._last[0]:
            return self._last[1]
        if not _few_rows(index):
            return take(self.x, index)
        size, at = self.row_bytes, self.offset
        out = torch.empty(len(index), self.shape[1], dtype=self.dtype)  # aligned as torch's own tensors
        view = memoryview(out.numpy()).cast("B")
        for i, row in enumerate(index.tolist()):
            os.preadv(self.fd, [view[i * size:(i + 1) * size]], at + row * size)
        self._last = (index, out)
        return out

    def __del__(self):
        if hasattr(self, "fd"):
            os.close(self.fd)


def rows(x: torch.Tensor):
    """x, or for a mapped x its ``FileRows``."""
    return FileRows(x) if hasattr(x, "_file") else x


def _few_rows(index) -> bool:
    return isinstance(index, torch.Tensor) and index.ndim == 1 and len(index) <= READ_ROWS


def take(x: torch.Tensor, index) -> torch.Tensor:
    """x[index]; for a mapped x read from the file (random rows) or through the map in ascending
    blocks of ``READ_ROWS`` rows, each block's pages handed back after it (200,000 random rows of
    6,000,000 taken at once mapped the whole 1.5 GB file before the pages went back)."""
    if hasattr(x, "_file") and _few_rows(index):
        return FileRows(x)[index]
    if not (hasattr(x, "_mapped") and isinstance(index, torch.Tensor) and index.ndim == 1):
        out = x[index]
        release(x)
        return out
    out = x.new_empty((len(index), *x.shape[1:]))
    for block in torch.argsort(index).split(READ_ROWS):
        rows = index[block]
        out[block] = x[rows]
        release(x, slice(int(rows.min()), int(rows.max()) + 1))
    return out


def passes(x: torch.Tensor, k: int, rows_per_block: int | None = None):
    """Slices covering x's rows (``ops.row_blocks`` for tables of k columns, or ``rows_per_block``
    rows each), handing back each block's pages after its turn."""
    blocks = row_blocks(x.shape[0], k, device=x.device) if rows_per_block is None else \
        [slice(start, min(start + rows_per_block, x.shape[0])) for start in range(0, x.shape[0], rows_per_block)]
    for rows in blocks:
        yield rows
        release(x, rows)


def centred_gram(x: torch.Tensor, centre: torch.Tensor) -> torch.Tensor:
    """sum_n (x_n - c)(x_n - c)^T in float64, accumulated block by block like ``column_sums``."""
    total = torch.zeros(x.shape[1], x.shape[1], dtype=torch.float64, device=x.device)
    for rows in passes(x, x.shape[1]):
        centred = (x[rows] - centre).double()
        total += centred.T @ centred
    return total


def column_sums(x: torch.Tensor) -> torch.Tensor:
    """x.sum(0) in float64, accumulated block by block (the same number in memory and from a file)."""
    total = torch.zeros(x.shape[1], dtype=torch.float64, device=x.device)
    for rows in passes(x, x.shape[1]):
        total += x[rows].sum(0, dtype=torch.float64)
    return total
