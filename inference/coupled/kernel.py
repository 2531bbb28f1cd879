"""``pyro.infer.MCMC`` over the coupled latent-DP Gibbs sampler (``inference.coupled.gibbs``).

A thin ``MCMCKernel``: each ``sample`` call is ``thin`` Gibbs sweeps of the internal state (one
by default), and what it returns are fixed-shape summaries, so that several chains stack, and
R-hat, ESS and ``arviz.from_pyro`` apply:

    log_joint         ln p(x, every latent) of the truncated model (``models.coupled_dp``), in closed form
    atoms_per_source  (S,) atoms holding at least one observation, by owning latent DP
    atoms_per_group   (T,) atoms holding at least one observation of each group
    alpha             (S,) the latent DPs' concentrations
    doc_concentration b, the document level's concentration, where it is sampled

The full state of each chain's last sweep is kept for prediction: in ``chain_states``, and with
``state_dir`` also written there as a file, which is how it comes back from chains that MCMC runs
in worker processes. With a ``checkpoint`` (``inference.checkpoint``) each chain writes its
state every few sweeps; a chain that finds its file replays the summaries in it (no sweeps) and
sweeps on from the saved state and generators, so MCMC collects the uninterrupted run. MCMC tells
each chain its index through ``initial_params`` (``{"chain": i}``), the one value it hands a
kernel per chain, in worker processes too. Known
traps of Pyro's MCMC (found by running it): ``transforms`` must exist, ``diagnostics`` must hold
``divergences``, nothing calls ``end_warmup`` (the kernel counts its own steps), MCMC
concatenates samples as floats, and ``arviz.from_pyro`` reads ``kernel.model``.
"""

import dataclasses
import math
import time
import uuid
from pathlib import Path

import numpy as np
import pyro
import scipy.stats
import torch
from pyro.infer.mcmc.mcmc_kernel import MCMCKernel
from torch.distributions import Gamma, Normal

from bnpzoo.inference.coupled import gibbs, uncollapsed
from bnpzoo.inference.checkpoint import ChainCheckpoint, CheckpointedChain
from bnpzoo.models.coupled_dp import mixing_weights, model as coupled_model
from bnpzoo.ops import clamp_probs


def _latent_trace(problem: gibbs.Problem, values: dict):
    """A trace of the program's latent sites (conditioned on ``values``), with the data plate cut
    to one observation: the sampler's start. The sampler integrates the topics out, so they are
    not drawn (a K x V Dirichlet draw cost more than 10 sweeps on lee_background)."""
    if problem.family == "categorical":
        _, _, k = problem.sizes
        values["phi"] = torch.full((k, problem.vocab_size), 1 / problem.vocab_size, dtype=problem.q.dtype)
    program = pyro.condition(coupled_model, data=values)
    cut = {"groups": problem.groups[:1].cpu()}  # the latents lie on the CPU, whatever the tokens' device
    cut |= {} if problem.documents is None else {"documents": problem.documents[:1].cpu()}
    return pyro.poutine.trace(program).get_trace(None, **dict(problem.model_kwargs, **cut))


def log_joint(problem: gibbs.Problem, state: gibbs.GibbsState) -> torch.Tensor:
    """ln p(x, latents) of the truncated program (``models.coupled_dp``), in closed form from the
    state and its counts (no trace: a Pyro trace of the program cost more than a sweep on small
    corpora; ``tests/test_coupled_gibbs.py`` checks this against the program's own trace). Words:
    the sampler collapses the topics, so phi is left out and ln p(x | z) integrates it. The
    coefficients c_t are scored over the sources group t can inherit (the program gives the others
    a vanishing concentration, where the sampler keeps c_ts = 0 exactly)."""
    _, s, k = problem.sizes
    q, alpha = problem.q, state.alpha.to(problem.q.dtype)
    shape, inherited = alpha[state.source] / problem.atoms_per_source, clamp_probs(q[:, state.source])
    # ln Gamma(w_k; alpha_{s_k} / L, 1) and ln Bernoulli(r_tk; q_{t s_k}) written out (q clamped as
    # torch's Bernoulli clamps it): torch.distributions' objects cost more than a small corpus's sweep
    # (about 2 ms a kept sample on pang_lee_polarity)
    latents = (-k * math.log(s)  # s_k ~ Uniform{1..S}
               + ((shape - 1) * state.weight.log() - state.weight - torch.lgamma(shape)).sum()
               + torch.where(state.inherit.bool(), inherited, 1 - inherited).log().sum())
    if problem.alpha is None:
        latents = latents + Gamma(*problem.alpha_prior, validate_args=False).log_prob(alpha).sum()
    if problem.documents is not None and problem.doc_concentration is None:
        b = state.doc_concentration.to(q.dtype)
        latents = latents + Gamma(*problem.doc_concentration_prior, validate_args=False).log_prob(b)
    if problem.family == "gaussian":
        precision, mean = state.params["precision"], state.params["mean"]
        latents = (latents
                   + Gamma(problem.prior_shape, problem.prior_rate, validate_args=False).log_prob(precision).sum()
                   + Normal(problem.prior_mean, (problem.prior_kappa * precision).rsqrt(),
                            validate_args=False).log_prob(mean).sum())
    return (latents + gibbs.coefficient_log_density(problem, state) + gibbs.label_log_likelihood(problem, state)
            + gibbs.data_log_likelihood(problem, state)).detach()


def sampler_cached() -> bool:
    """Whether numba's cache holds the sampler's shared steps (``compiled.move_atoms``, which
    every chain runs; False: the next fit compiles the sampler, 10 to 30 s once; a kind of fit not
    run before compiles its own few loops, about a second, unannounced). Reads numba's cache
    index, which is not public API: where it cannot be read, True (nothing is announced)."""
    from bnpzoo.inference.coupled.compiled import move_atoms

    try:
        return bool(move_atoms._cache._cache_file._load_index())
    except (AttributeError, OSError):
        return True


def prepare(problem: gibbs.Problem) -> float:
    """Compile (or load from numba's cache) every loop a chain on ``problem`` runs, by starting
    one chain on its first few observations, so that a fit's sampling time holds sweeps only; the
    seconds it took."""
    start, cut = time.perf_counter(), min(64, len(problem.x))
    head = {"x": problem.x[:cut], "groups": problem.groups[:cut]}
    head.update({name: getattr(problem, name)[:cut] for name in ("multiplicity", "documents")
                 if getattr(problem, name) is not None})
    small = dataclasses.replace(problem, ranks=None, **head)  # each process compiles alone
    rng = torch.get_rng_state()  # the fit's draws stay those it would make without this
    log_joint(small, gibbs.average_topics(small, CoupledGibbsKernel(small)._initial_state()))
    torch.set_rng_state(rng)
    return time.perf_counter() - start


GROW_EVERY = 10  # warm-up sweeps 10, 20, ... look whether the pool is full (``gibbs.grown``)
SUBSET_TOKENS, SUBSET_SWEEPS = 1_000_000, 100  # the uncollapsed step's start (``subset_start``)


def subset_start(problem: gibbs.Problem) -> gibbs.GibbsState:
    """The start of an uncollapsed chain (``inference.coupled.uncollapsed``), whose label step
    mixes slowly: a chain of the collapsed sampler (on the CPU, its pool growing) runs
    ``SUBSET_SWEEPS`` sweeps on whole documents drawn at random until they hold ``SUBSET_TOKENS``
    tokens (every document of a smaller corpus); its tokens keep their labels, every other token's
    is drawn given the topics and D_t, p(z_i = k) propto D_t(k) phi_k(w_i), phi_k ~ Dir(beta + n_k.)
    of the subset's labels; then the tables given the labels. Any start leaves the chain exact;
    this one starts it where the collapsed sampler's topics are (``benchmarks/reports/gpu.md``)."""
    starts = problem.document_starts
    order = torch.randperm(len(starts) - 1).numpy()  # torch's generator: the chain's seed sets it
    lengths = np.diff(starts)
    chosen = np.sort(order[: int(np.searchsorted(np.cumsum(lengths[order]), SUBSET_TOKENS)) + 1])
    sizes = lengths[chosen]
    within = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)  # each token's place in its document
    tokens = torch.from_numpy(np.repeat(starts[chosen], sizes) + within)
    documents = None if problem.documents is None else torch.repeat_interleave(torch.arange(len(chosen)),
                                                                                torch.from_numpy(sizes))
    step = gibbs.label_step(None, documents=documents is not None)
    subset = dataclasses.replace(problem, x=problem.x.cpu()[tokens], groups=problem.groups.cpu()[tokens],
                                 documents=documents, label_step=step)
    kernel = CoupledGibbsKernel(subset)
    kernel.setup(SUBSET_SWEEPS)
    for _ in range(SUBSET_SWEEPS):
        kernel.sample({})
    problem, state = gibbs.resized(problem, kernel.state), kernel.state
    mix = mixing_weights(state.coeffs, state.inherit, state.weight, state.source, problem.sizes[1])
    device_starts, bounds = problem.device_document_starts
    z = torch.empty_like(problem.x)
    everything = (problem.x, problem.groups, None, device_starts, bounds)
    counts = gibbs.word_counts(kernel.problem, state.z).to(z.device)
    uncollapsed.sweep_labels(everything, z, counts, mix.to(z.device), 1.0, problem.beta)
    z[tokens.to(z.device)] = state.z.to(z.device)  # the subset keeps its labels
    state = dataclasses.replace(state, z=z)
    return gibbs.with_tables(problem, state) if problem.documents is not None else state


class CoupledGibbsKernel(CheckpointedChain, MCMCKernel):
    """One chain of the sampler on ``problem``; ``thin``: sweeps per sample; ``state_dir``: a
    folder for the final states; ``checkpoint``: where chains save and resume."""

    def __init__(self, problem: gibbs.Problem, *, init_sweeps: int = 1, thin: int = 1, state_dir=None,
                 checkpoint: ChainCheckpoint | None = None):
        self.problem, self.init_sweeps, self.thin = problem, init_sweeps, thin
        self._problem = problem  # each chain starts from it (a chain's warm-up may grow its pool)
        self.state_dir, self.checkpoint = state_dir, checkpoint
        self.transforms = {}
        self.model = None  # arviz.from_pyro reads it; None skips its observed-data group
        self.chain_states = []
        self.state = None
        self._warmup_steps = self._t = self._chain = 0

    def _initial_state(self) -> gibbs.GibbsState:
        """Latents from the prior (the program run without data) with the concentrations at their
        prior median, labels from the groups' mixtures, then labels given the data. (Draws from
        Gamma(0.1, 0.1) span 1e-10 to 13, and a chain keeps the layout of atoms its first alpha
        sets: a latent DP started near 5 hands its atoms to many groups.)"""
        if self.problem.label_step.on_device:  # its start: a collapsed fit of a subset
            return subset_start(self.problem)
        values, median = {}, lambda shape, rate: float(scipy.stats.gamma(shape, scale=1 / rate).median())
        if self.problem.alpha is None:
            values["alpha"] = torch.full((self.problem.sizes[1],), median(*self.problem.alpha_prior),
                                         dtype=self.problem.q.dtype)
        if self.problem.documents is not None and self.problem.doc_concentration is None:
            values["doc_concentration"] = torch.tensor(median(*self.problem.doc_concentration_prior),
                                                       dtype=self.problem.q.dtype)
        state = gibbs.state_from_trace(_latent_trace(self.problem, values), self.problem)
        state = gibbs.update_labels(self.problem, gibbs.prior_labels(self.problem, state))
        for _ in range(self.init_sweeps):
            state = gibbs.sweep(self.problem, state)
        return state

    def summary(self, state: gibbs.GibbsState) -> dict:
        t, s, k = self.problem.sizes
        counts = gibbs.label_counts(self.problem, state.z)
        used = (counts.sum(0) > 0).to(counts.dtype)
        owner = torch.nn.functional.one_hot(state.source, s).to(counts.dtype)
        summary = {"log_joint": log_joint(self.problem, state),
                   "atoms_per_source": used @ owner, "atoms_per_group": (counts > 0).to(counts.dtype).sum(1),
                   "alpha": state.alpha.clone()}
        if state.doc_concentration is not None:
            summary["doc_concentration"] = state.doc_concentration.clone()
        return summary

    def setup(self, warmup_steps, *args, **kwargs):
        self._warmup_steps, self._t, self.problem = warmup_steps, 0, self._problem
        saved = self.resumed()
        self.state = self._initial_state() if saved is None else gibbs.GibbsState(**saved)
        self.problem = gibbs.resized(self.problem, self.state)  # as it had grown (or its start grew it)

    @property
    def initial_params(self):
        return self.summary(self.state)

    @initial_params.setter
    def initial_params(self, params):
        # the chain's index; the sampler starts from its own prior draw (setup), summaries cannot seed it
        self._chain = int(params.get("chain", 0))

    def sample(self, params):
        replayed = self.replayed()  # resumed: what the chain returned before it stopped
        if replayed is not None:
            return replayed
        self.state = gibbs.sweep(self.problem, self.state, self.thin)
        # MCMC drops what warm-up steps return: the summaries (about a fifth of a sweep's time on
        # lee_background) and the topics' average are for kept samples only
        if self._t < self._warmup_steps:
            summary = params
            # the truncation is not to bind: a full pool grows, looked at every GROW_EVERY sweeps
            # (a chain's first sweeps spread its labels over every atom, data or not; a fixed
            # schedule, so that a resumed chain grows where the uninterrupted one did)
            if (self._t + 1) % GROW_EVERY == 0 and gibbs.pool_full(self.problem, self.state):
                self.problem, self.state = gibbs.grown(self.problem, self.state)
        else:
            self.state = gibbs.average_topics(self.problem, self.state)
            summary = self.summary(self.state)
        self._t += 1
        self.recorded(summary)
        return summary

    def _checkpoint_state(self) -> dict:
        return {field.name: getattr(self.state, field.name) for field in dataclasses.fields(self.state)}

    @property
    def warming_up(self) -> bool:
        return self._t <= self._warmup_steps

    def cleanup(self):
        if self.state is not None:
            self.ended()
            self.chain_states.append(self.state)
            if self.state_dir is not None:
                torch.save(self.state, Path(self.state_dir) / f"chain-{uuid.uuid4().hex}.pt")
            self.state = None

    def logging(self):
        return {"phase": "warmup" if self.warming_up else "sample"}

    def diagnostics(self):
        return {"divergences": [], "sweeps": self._t}
