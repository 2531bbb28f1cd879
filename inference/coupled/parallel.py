"""Step 1 of the document level swept over documents in parallel, with the topics drawn: a partially
collapsed sampler (Magnusson, Jonsson, Villani and Broman 2018, "Sparse partially collapsed MCMC for
parallel inference in topic models", for LDA; Terenin, Magnusson and Jonsson 2020, "Sparse parallel
training of hierarchical Dirichlet process topic models", for the HDP).

The collapsed step 1 (``compiled.document_labels``) integrates the topics phi out, so every token's
draw reads the counts n_kw that every other document changes: one sequential loop over the corpus.
Given phi and the groups' measures D_t, the document level factorises over documents,

    p(z, m | phi, D, x)  =  prod_d p(z_d, m_d | phi, D_{t(d)}, x_d),

so each document's labels, block moves and tables are drawn by one thread with no approximation,
and the threads never share a count. One sweep of step 1:

  1a  phi_k ~ Dir(beta + n_k.), given every label (``draw_topics``). Drawn, used in 1b and dropped:
      a data-augmentation step, so together with 1b it keeps p(z, m | D, x), the target of the
      collapsed step, and steps 2-7 run unchanged on the tables m_tk.
  1b  for each document d of group t, in parallel (``sweep_documents``):
      - its tokens one at a time, theta_d collapsed:
            p(z_di = k | .)  propto  (n_dk^-di + b D_t(k)) phi_k(w_di),
        split in two buckets, Terenin et al.'s doubly sparse draw without their approximation
        (they draw phi from a Polya urn, exactly sparse; here phi is the exact Dirichlet draw):
            the document's:  sum over the atoms d uses of n_dk^-di phi_k(w)     O(atoms d uses)
            the prior's:     P_tw = sum_k b D_t(k) phi_k(w), one (T, K) x (K, V) product a sweep;
        a uniform on the total picks the bucket, and only the prior's is scanned over all K atoms,
        with probability P_tw / total (small once a document holds a few tokens);
      - its block moves (``compiled.document_moves``: every token of d on one atom moves to an
        atom d does not use, by Metropolis-Hastings), with phi given, so a cell of n tokens scores
            ln p(cell | j) - ln p(cell | k) = sum_{i in cell} ln phi_j(w_i) - ln phi_k(w_i)
        in place of the collapsed topics' ratio; the proposal j ~ D_t over the atoms d leaves free
        is ``compiled.free_atom``'s;
      - its tables, Antoniak's scheme as ``compiled.document_tables``, one flag per token (the
        token opened a table); m_tk sums them by group.

The documents are cut into blocks of about ``BLOCK_TOKENS`` consecutive tokens; block j draws
from numba's generator seeded with (sweep seed + j), so a sweep's draws do not depend on the
number of threads, nor on how blocks are shared among processes.

Several processes (``Ranks``, ``torch.distributed``): each holds whole blocks of documents, its
share, and sweeps them; the word counts n_kw that 1a reads and the tables m_tk that steps 2-7 read
are sums over documents, all-reduced every sweep, and every other draw (phi, steps 2-7, b) comes from
torch's generator on the same sums in every process. With the blocks' seeds, a chain's draws are the
same whatever the number of processes and threads: only the order in which float64 sums of integer
counts are added differs, and those are exact below 2^53.

Without the document level every token is a document of its own with b = 1 (no theta_d, nothing
collapsed but the tables, which every token opens): p(z_i = k | phi, D) propto D_t(k) phi_k(w_i),
the group level's step 1 given phi ([Coupled-DP] eq. (10)-(11)), swept the same way; the
split-merge moves, which carry tokens under collapsed topics, do not run there.

What it costs: 1a draws K V gammas a sweep, which the collapsed step never does; 1b's work per
token is the atoms its document uses, not the atoms its group reaches. So it pays on corpora
whose tokens outnumber K V many times, and on more than one core (``gibbs.Problem.parallel``).
"""

import math
import os
from dataclasses import dataclass, field

import numba
import numpy as np
import torch
from numba import njit, prange

from bnpzoo.inference.coupled.compiled import add_token, free_atom, move_prior_ratio, opened_tables, remove_token


@dataclass(frozen=True)
class Ranks:
    """This process's share of a data-parallel chain: the blocks ``first_block``, ... of the corpus's
    (``document_blocks``) and their tokens; ``document_lengths`` n_d of every document of the corpus
    (b's step reads them all); ``group`` the ``torch.distributed`` process group."""

    first_block: int
    document_lengths: torch.Tensor
    group: object = field(repr=False, compare=False, metadata={"fingerprint": False})

    @property
    def rank(self) -> int:
        from bnpzoo.inference.data_parallel import rank

        return rank(self.group)

    @property
    def size(self) -> int:
        from bnpzoo.inference.data_parallel import size

        return size(self.group)

    def sum(self, *tensors) -> list:
        """Each tensor summed over the processes (``inference.data_parallel.all_sum``)."""
        from bnpzoo.inference.data_parallel import all_sum

        return all_sum(tensors, self.group)


def own_blocks(blocks: np.ndarray, rank: int, size: int) -> tuple:
    """(first block, first document, end document) of process ``rank`` of ``size``: contiguous
    shares of the blocks, differing by at most one block."""
    count = len(blocks) - 1
    first, end = rank * count // size, (rank + 1) * count // size
    return first, int(blocks[first]), int(blocks[end])


BLOCK_TOKENS = 4096  # tokens per block of documents (one generator seed each)
compiled_parallel = njit(cache=True, error_model="numpy", parallel=True)
compiled = njit(cache=True, error_model="numpy")


def document_blocks(document_starts: np.ndarray, block_tokens: int = BLOCK_TOKENS) -> np.ndarray:
    """Where each block of consecutive documents starts (document indices, and D last): a new block
    at the first document that starts ``block_tokens`` or more tokens after the current block's."""
    starts = np.asarray(document_starts, dtype=np.int64)
    firsts = [0]
    while True:
        following = int(np.searchsorted(starts, starts[firsts[-1]] + block_tokens))  # the first such document
        if following >= len(starts) - 1:
            return np.asarray(firsts + [len(starts) - 1], dtype=np.int64)
        firsts.append(following)


def threads() -> int:
    """The threads of ``sweep_documents``: ``BNPZOO_THREADS`` where it is a number, else every core
    numba may use (the estimators run torch on one thread for the small steps around it), shared
    among the processes torchrun started on this host."""
    from bnpzoo.threads import threads_for

    cores = numba.config.NUMBA_NUM_THREADS // int(os.environ.get("LOCAL_WORLD_SIZE", 1))  # torchrun's processes share
    return max(1, min(threads_for(float("inf")) or cores, numba.config.NUMBA_NUM_THREADS))


def release_memory() -> None:
    """Give the memory that numba's threads freed back to the system (glibc's ``malloc_trim``; a
    no-op elsewhere). Without it a fit grew by about 12 MB a sweep on enwiki's 127,583 tokens, as
    each thread's malloc arena kept what it freed (with one arena, ``MALLOC_ARENA_MAX=1``, it did
    not grow)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _glibc():
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


_LIBC = _glibc()


def draw_topics(word_atom_counts: torch.Tensor, beta: float) -> torch.Tensor:
    """phi word-major, (V, K): each column phi_k ~ Dir(beta + n_k.) (step 1a), from torch's generator.
    Draws that underflow are kept at the smallest normal number (``gibbs._floored``)."""
    gammas = torch._standard_gamma(word_atom_counts + beta).clamp_min(torch.finfo(torch.float64).tiny)
    return gammas / gammas.sum(0, keepdim=True)


@compiled_parallel
def prior_document_labels(groups, starts, blocks, mixing, z, seed):  # pragma: no cover (compiled)
    """z_i ~ D_t for every token (``gibbs.prior_labels``), blocks in parallel, block j from numba's
    generator seeded with (seed + j): the start of a chain, the same in any number of processes."""
    for block in prange(blocks.shape[0] - 1):
        np.random.seed((seed + block) % 4294967296)
        for i in range(starts[blocks[block]], starts[blocks[block + 1]]):
            t = groups[i]
            target, acc, j = np.random.random(), 0.0, 0
            while j < mixing.shape[1] - 1:
                acc += mixing[t, j]
                if acc > target:
                    break
                j += 1
            z[i] = j


@compiled
def _labels(document, tokens, phi, priors, used, n_atoms, cumulative):
    """The ``document`` (lo, hi, t)'s tokens lo..hi-1 one at a time (the module docstring's two
    buckets); ``tokens`` = (x, z), ``priors`` = (b D_t(k), P_tw), ``used`` = (n_dk, the atoms the
    document uses, where each lies among them: ``compiled.add_token``); returns the atoms' count."""
    lo, hi, t = document
    x, z = tokens
    prior, prior_total = priors
    ndk, atoms, where = used
    k_count = prior.shape[1]
    for i in range(lo, hi):
        w = x[i]
        n_atoms = remove_token(z[i], ndk, atoms, where, n_atoms)
        total = 0.0
        for j in range(n_atoms):
            total += ndk[atoms[j]] * phi[w, atoms[j]]
            cumulative[j] = total
        target = np.random.random() * (total + prior_total[t, w])
        new = -1
        if target < total:
            j = 0
            while j < n_atoms - 1 and cumulative[j] <= target:
                j += 1
            new = atoms[j]
        else:
            target -= total
            acc = 0.0
            for k in range(k_count):
                value = prior[t, k] * phi[w, k]
                if value > 0:
                    new = k
                    acc += value
                    if acc > target:
                        break
        if new < 0:  # every term underflowed (P_tw and the scan both 0): the token stays
            new = z[i]
        z[i] = new
        n_atoms = add_token(new, ndk, atoms, where, n_atoms)
    return n_atoms


@compiled
def _moves(document, tokens, phi, mixings, b, used, n_atoms):
    """The ``document``'s block moves given phi (the module docstring; ``compiled.document_moves``);
    ``mixings`` = (D_t, its cumulative sums), the rest as ``_labels``'s."""
    lo, hi, t = document
    x, z = tokens
    mixing, cumulative_mixing = mixings
    ndk, atoms, where = used
    a = 0
    while a < n_atoms:
        k = atoms[a]
        n = ndk[k]
        free = 1.0
        for other in range(n_atoms):
            if atoms[other] != k:
                free -= mixing[t, atoms[other]]
        room = free - mixing[t, k]
        j = free_atom(t, k, mixing, cumulative_mixing, ndk, room) if room > 0 else -1
        if j >= 0:
            log_ratio = move_prior_ratio(t, k, j, n, mixing, b, free)
            for i in range(lo, hi):
                if z[i] == k:
                    log_ratio += math.log(phi[x[i], j]) - math.log(phi[x[i], k])
            if np.log(np.random.random()) < log_ratio:
                for i in range(lo, hi):
                    if z[i] == k:
                        z[i] = j
                ndk[k], ndk[j] = 0, n
                where[j] = a
                atoms[a] = j
        a += 1


NO_UNIFORMS = np.empty(0)  # ``opened_tables`` draws from each block's own seeded generator


@compiled_parallel
def sweep_documents(corpus, z, opened, topics, seed):  # pragma: no cover (compiled)
    """Step 1b over every document, blocks in parallel: z (N,) and opened (N,) are written in place.
    ``corpus`` = (x, groups, starts, blocks): the words, their groups, where each document starts
    and each block of documents; ``topics`` = (phi (V, K) the topics word-major, prior (T, K)
    b D_t(k) (0 where flushed), prior_total (T, V) P_tw, mixing (T, K) D_t, cumulative_mixing its
    cumulative sums, b)."""
    x, groups, starts, blocks = corpus
    phi, prior, prior_total, mixing, cumulative_mixing, b = topics
    k_count = mixing.shape[1]
    for block in prange(blocks.shape[0] - 1):
        np.random.seed((seed + block) % 4294967296)
        ndk = np.zeros(k_count, dtype=np.int64)
        seen = np.zeros(k_count, dtype=np.int64)
        atoms = np.empty(k_count, dtype=np.int64)
        where = np.empty(k_count, dtype=np.int64)
        cumulative = np.empty(k_count)
        for d in range(blocks[block], blocks[block + 1]):
            lo, hi = starts[d], starts[d + 1]
            t = groups[lo]
            n_atoms = 0
            for i in range(lo, hi):
                n_atoms = add_token(z[i], ndk, atoms, where, n_atoms)
            document, used = (lo, hi, t), (ndk, atoms, where)
            n_atoms = _labels(document, (x, z), phi, (prior, prior_total), used, n_atoms, cumulative)
            _moves(document, (x, z), phi, (mixing, cumulative_mixing), b, used, n_atoms)
            opened_tables((lo, hi, t), z, mixing, b, seen, NO_UNIFORMS, opened)
            for i in range(lo, hi):
                ndk[z[i]] = 0
