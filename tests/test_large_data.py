"""Data in a memory-mapped .npy file: fitted in place, with the same result as in memory, without
keeping the file's pages in the process (``bnpzoo.mapped``)."""

import sys

import numpy as np
import pytest
import torch

from bnpzoo import DPGMM
from bnpzoo.data import blobs, load_file
from bnpzoo.mapped import FileRows, take


@pytest.fixture(scope="module")
def mapped_blobs(tmp_path_factory):
    data = blobs(n=4000, d=5, k=4, seed=2)
    path = tmp_path_factory.mktemp("large") / "blobs.npy"
    np.save(path, data.X)
    return data.X, np.load(path, mmap_mode="r")


@pytest.mark.cpu_state  # bit for bit across two code paths
@pytest.mark.parametrize("inference", ["vmm", "natgrad-svi", "sga", "svmm"])
def test_a_memory_mapped_file_fits_exactly_as_the_array_in_memory(mapped_blobs, inference):
    array, mapped = mapped_blobs
    fits = [DPGMM(inference=inference, truncation=10, random_state=0).fit(X) for X in (array, mapped)]
    assert np.array_equal(fits[0].means_, fits[1].means_) and fits[0].elbo_trace_ == fits[1].elbo_trace_
    assert np.array_equal(fits[0].predict(array), fits[1].predict(mapped))
    assert np.array_equal(fits[0].score_samples(array), fits[1].score_samples(mapped))


def test_rows_read_from_the_file_equal_the_rows_of_the_map(mapped_blobs):
    array, mapped = mapped_blobs
    from bnpzoo._validation import check_array

    x = check_array(mapped[1000:3000])  # a slice of the map starts inside the file
    index = torch.tensor([0, 1999, 7, 7, 500])
    assert torch.equal(FileRows(x)[index], torch.from_numpy(array[1000:3000][index.numpy()]))
    assert torch.equal(take(x, index), FileRows(x)[index])


def test_many_rows_are_taken_through_the_map_block_by_block(mapped_blobs, monkeypatch):
    """More rows than ``READ_ROWS`` (here 300 of them): read through the map in ascending blocks,
    each block's pages handed back; the rows, repeats and order as indexing gives them."""
    import bnpzoo.mapped as mapped
    from bnpzoo._validation import check_array

    array, mapped_array = mapped_blobs
    monkeypatch.setattr(mapped, "READ_ROWS", 300)
    x, released = check_array(mapped_array), []
    monkeypatch.setattr(mapped, "release", lambda x, rows=None: released.append(rows))
    index = torch.randint(0, 4000, (1000,), generator=torch.Generator().manual_seed(0))
    assert torch.equal(take(x, index), torch.from_numpy(array[index.numpy()]))
    assert len(released) == 4 and all(rows is not None for rows in released)


def _resident_bytes(path) -> int:
    """Resident bytes of the mappings of ``path`` in this process (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        lines = smaps.readlines()
    for line in lines:
        if "-" in line.split()[0] and len(line.split()) >= 5:
            inside = line.rstrip().endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1]) * 1024
    return total


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
@pytest.mark.parametrize("inference", ["vmm", "natgrad-svi"])
def test_a_fit_hands_back_the_pages_of_the_file(tmp_path, inference):
    path = tmp_path / "wide.npy"
    np.save(path, blobs(n=100_000, d=64, k=8, seed=1).X)  # 25.6 MB
    X = load_file(path)  # what the command line reads: the map itself
    assert isinstance(X, np.memmap)
    est = DPGMM(inference=inference, truncation=16, random_state=0).fit(X)
    est.predict(X)
    # the passes and minibatches touched every row; what stays mapped is at most a block
    assert _resident_bytes(path) < 0.1 * path.stat().st_size


def test_a_copy_on_write_map_is_fitted_as_changed_and_keeps_the_changes(mapped_blobs, tmp_path):
    array, _ = mapped_blobs
    path = tmp_path / "cow.npy"
    np.save(path, array)
    changed = np.load(path, mmap_mode="c")
    changed[:2000] += 50.0  # in this process only; the file keeps the old rows
    fits = [DPGMM(inference="natgrad-svi", truncation=10, random_state=0).fit(X)
            for X in (np.array(changed), changed)]
    assert np.array_equal(fits[0].means_, fits[1].means_)
    assert np.array_equal(changed[:2000], array[:2000] + 50.0)
