"""The coupled latent-DP sampler on (group, word) cells, in compiled steps.

On cells (``gibbs.cells``: words only, labels as (C, K) counts, blocked label step) every step
works on arrays of T x S, T x K or C x K entries, where torch's per-call overhead outweighed the
arithmetic (``benchmarks/reports/speed.md``). Here every step runs under numba on one generator
seeded from torch's (``seed``), driven
from Python (a compiled driver would compile every step again inside itself): the same steps as
``gibbs`` (whose docstring derives their full conditionals), steps 2 and 5 with the
coefficients integrated out, drawn in a different order of random numbers:

    step 1     ``compiled.draw_cell_labels`` on D_t from ``_mixing``
    steps 2, 5 ``compiled.move_atoms`` with the coefficients c integrated out, so that an atom
               holding a group's tokens can move to a latent DP whose c_ts the group has left near
               0 (given c, such a move costs n_tk ln c_ts and never happens: over 2 x 100,000
               sweeps on digits-bags the atoms each latent DP owned, and alpha_s, kept their
               chain's values, R-hat up to 1.4); step 3 follows them, as a partially collapsed
               sampler needs (van Dyk and Park 2008): the sweep runs 1, 2, 5, 3, 6
    step 3     ``_coefficients``: c_t by the Dirichlet's aggregation property over the active sources
    step 6     ``_weights``: given the auxiliaries V_ts, alpha_s with the weights integrated out
               (``compiled.alpha_given_auxiliaries``, what step 7 was), then w_k, then each
               latent DP's total mass redrawn

(step 4 does nothing: the topics are collapsed). Steps 2, 3, 5 and 6 see the labels only
through their counts per group, m_tk, and ``count_sweeps`` runs them on given counts (with c
given, in the order 2, 3, 5, 6) for the token-level samplers that have no token moves: the document
level, whose counts are its tables (``gibbs.counts_sweep``). ``tests/test_coupled_gibbs.py``
checks each step (or block) from exact joint draws and the whole sweep by Geweke's test.

numba's on-disk cache of this module's compiled steps does not notice edits to ``compiled``,
whose functions they compile in: after editing that file, delete ``inference/__pycache__/*.nb*``.
"""

import math
from typing import NamedTuple

import numpy as np

from bnpzoo.inference.coupled.compiled import (ALPHA_ROUNDS, TINY, alpha_given_auxiliaries, column_sum, compiled,
                                            draw_cell_labels, log_array, move_atoms)

STEPS = np.array([1, 2, 5, 3, 6], dtype=np.int64)
COUNT_STEPS = np.array([2, 3, 5, 6], dtype=np.int64)  # ``count_sweeps``: the steps that see only the counts
ATOM_STEPS = (2, 5)  # ``move_atoms``: in ``sweeps`` they integrate c out, so that step 3 must follow


class Latents(NamedTuple):
    """The coupled latents as numpy arrays the compiled steps update in place: alpha (S,), each
    atom's source (K,), the weights w (K,), the coefficients c (T, S), the inheritance (T, K)."""

    alpha: np.ndarray
    source: np.ndarray
    weight: np.ndarray
    coeffs: np.ndarray
    inherit: np.ndarray


class Settings(NamedTuple):
    """The sampler's fixed settings that steps 2, 3, 5 and 6 read: q (T, S), the atoms per source L,
    alpha's Gamma(alpha_shape, alpha_rate) prior, its walk's step, and whether alpha is sampled."""

    q: np.ndarray
    atoms_per_source: int
    alpha_shape: float
    alpha_rate: float
    alpha_step: float
    sample_alpha: bool


class Words(NamedTuple):
    """The (group, word) cells: word ids x and groups (C,), the vocabulary's size, the topics' beta."""

    x: np.ndarray
    groups: np.ndarray
    vocab: int
    beta: float


@compiled
def _inherited_mass(inherit, weight, source, s_count):
    """(effective inheritance r~ (T, K), W_ts (T, S)), as ``models.coupled_dp.inherited_mass``: a
    group that inherits nothing takes every atom."""
    t_count, k_count = inherit.shape
    effective = inherit.copy()
    mass = np.zeros((t_count, s_count))
    for t in range(t_count):
        inherited = 0
        for k in range(k_count):
            inherited += inherit[t, k]
        for k in range(k_count if inherited == 0 else 0):
            effective[t, k] = 1
        for k in range(k_count):
            if effective[t, k]:
                mass[t, source[k]] += weight[k]
    return effective, mass


@compiled
def _mixing(coeffs, inherit, weight, source):
    """D_t(k) = c_{t s_k} r~_tk w_k / (W_{t s_k} Z_t), (T, K) (``models.coupled_dp.mixing_weights``)."""
    effective, mass = _inherited_mass(inherit, weight, source, coeffs.shape[1])
    mix = np.zeros(effective.shape)
    for t in range(mix.shape[0]):
        norm = 0.0  # Z_t: the coefficients of the active sources
        for s in range(coeffs.shape[1]):
            norm += coeffs[t, s] if mass[t, s] > 0 else 0.0
        for k in range(mix.shape[1]):
            owner_mass = mass[t, source[k]]
            if effective[t, k] and owner_mass > 0:
                mix[t, k] = weight[k] / owner_mass * (coeffs[t, source[k]] / norm)
    return mix


@compiled
def _label_counts(groups, z, t_count):
    """m_tk, (T, K), from the cells' counts."""
    counts = np.zeros((t_count, z.shape[1]))
    for c in range(z.shape[0]):
        counts[groups[c]] += z[c]
    return counts


@compiled
def _per_source(counts, source, s_count):
    """n_ts = sum_{s_k = s} m_tk, (T, S)."""
    n = np.zeros((counts.shape[0], s_count))
    for t in range(counts.shape[0]):
        for k in range(counts.shape[1]):
            n[t, source[k]] += counts[t, k]
    return n


@compiled
def _gamma_log_density(value, shape):
    """ln Gamma(value; shape, 1)."""
    return (shape - 1) * np.log(value) - value - math.lgamma(shape)


@compiled
def _log_gamma_draw(shape):
    """ln of a Gamma(shape, 1) draw, as ln Gamma(shape + 1) + ln U / shape (``gibbs._log_gamma``)."""
    return np.log(np.random.gamma(shape + 1)) + np.log(np.random.random()) / shape


@compiled
def _log_complement(q):
    """ln(1 - q), elementwise, (T, S)."""
    out = np.empty(q.shape)
    for t in range(q.shape[0]):
        for s in range(q.shape[1]):
            out[t, s] = np.log1p(-q[t, s])
    return out


@compiled
def _coefficients(counts, inherit, weight, source, alpha, q, coeffs):  # step 3
    """c_t (T, S) in place: c_A / Z ~ Dir(alpha q_A + n_tA) over the active sources A (W_ts > 0),
    Z ~ Beta(sum_A alpha q, sum_{A^c} alpha q), c_{A^c} / (1 - Z) ~ Dir(alpha q_{A^c}), on q_ts > 0."""
    t_count, s_count = q.shape
    _, mass = _inherited_mass(inherit, weight, source, s_count)
    n = _per_source(counts, source, s_count)
    inside, outside = np.zeros(s_count), np.zeros(s_count)
    for t in range(t_count):
        conc_in = conc_out = total_in = total_out = 0.0
        for s in range(s_count):
            inside[s] = outside[s] = 0.0
            if q[t, s] == 0:
                continue
            conc = alpha[s] * q[t, s]
            if mass[t, s] > 0:
                inside[s] = max(np.random.gamma(conc + n[t, s]), TINY)
                total_in, conc_in = total_in + inside[s], conc_in + conc
            else:
                outside[s] = max(np.random.gamma(conc), TINY)
                total_out, conc_out = total_out + outside[s], conc_out + conc
        g_in = max(np.random.gamma(max(conc_in, 1e-300)), TINY)
        g_out = np.random.gamma(conc_out) if conc_out > 0 else 0.0
        share = g_in / (g_in + g_out)
        norm = 0.0
        for s in range(s_count):
            coeffs[t, s] = 0.0
            if q[t, s] > 0:
                a = inside[s] / total_in if total_in > 0 else 0.0
                b = outside[s] / total_out if total_out > 0 else 0.0
                coeffs[t, s] = max(share * a + (1 - share) * b, TINY)
                norm += coeffs[t, s]
        for s in range(s_count):
            coeffs[t, s] /= norm


@compiled
def auxiliary_rates(counts, inherit, weight, source, s_count):  # pragma: no cover (compiled)
    """Step 6's (m_k, ln(1 + sum_t r~_tk V_{t s_k})), (K,) each, and V (T, S), V_ts ~ Gamma(n_ts, W_ts)."""
    t_count, k_count = counts.shape
    effective, mass = _inherited_mass(inherit, weight, source, s_count)
    n = _per_source(counts, source, s_count)
    aux = np.zeros((t_count, s_count))
    for t in range(t_count):
        for s in range(s_count):
            if n[t, s] > 0:
                aux[t, s] = np.random.gamma(n[t, s]) * (1.0 / max(mass[t, s], 1e-300))  # (one gamma overload)
    used, log_rate = np.empty(k_count), np.empty(k_count)
    for k in range(k_count):
        rate = 1.0
        for t in range(t_count):
            rate += effective[t, k] * aux[t, source[k]]
        used[k], log_rate[k] = column_sum(counts, k), math.log(rate)
    return used, log_rate, aux


@compiled
def _walk(s_count, alpha_step):  # pragma: no cover (compiled)
    """``alpha_given_auxiliaries``'s random-walk steps and log-uniforms, (ALPHA_ROUNDS, S) each."""
    steps, log_uniforms = np.empty((ALPHA_ROUNDS, s_count)), np.empty((ALPHA_ROUNDS, s_count))
    for r in range(ALPHA_ROUNDS):
        for s in range(s_count):
            steps[r, s] = alpha_step * np.random.standard_normal()
    for r in range(ALPHA_ROUNDS):
        for s in range(s_count):
            log_uniforms[r, s] = math.log(np.random.random())
    return steps, log_uniforms


@compiled
def _draw_weights(used, log_rate, source, alpha, atoms_per_source, weight):  # pragma: no cover (compiled)
    """w (K,) in place: w_k ~ Gamma(alpha_{s_k} / L + m_k, 1 + sum_t r~_tk V_{t s_k}), then each latent
    DP's total mass redrawn from Gamma(sum_{s_k = s} alpha_s / L, 1), its shares kept
    (the labels see the weights only through shares of one source, and K_s Gamma(a, 1) weights are
    a Gamma(K_s a, 1) total times independent Dirichlet shares: without the redraw T_s random-walks,
    by about 1 / sqrt(n) in ln T_s a sweep, and its prior terms (a - 1) ln w_k shift the log joint by
    thousands of nats between chains); in logarithms, as small shapes underflow."""
    k_count, s_count = weight.shape[0], alpha.shape[0]
    shape, log_weight = np.empty(k_count), np.empty(k_count)
    for k in range(k_count):
        shape[k] = alpha[source[k]] / atoms_per_source
        log_weight[k] = _log_gamma_draw(shape[k] + used[k]) - log_rate[k]
    for s in range(s_count):
        owned, top, total_shape = False, -np.inf, 0.0
        for k in range(k_count):
            if source[k] == s:
                owned, top, total_shape = True, max(top, log_weight[k]), total_shape + shape[k]
        if not owned:
            continue
        log_total = 0.0
        for k in range(k_count):
            if source[k] == s:
                log_total += math.exp(log_weight[k] - top)
        shift = _log_gamma_draw(total_shape) - (top + math.log(log_total))
        for k in range(k_count):
            if source[k] == s:
                log_weight[k] += shift
    for k in range(k_count):
        weight[k] = max(math.exp(log_weight[k]), TINY)


def _weights(counts, latents: Latents, settings: Settings):  # step 6
    """w (K,) in place, and alpha (S,) when ``settings.sample_alpha``: V_ts ~ Gamma(n_ts, W_ts), then
    ``weights_given_auxiliaries``."""
    used, log_rate, _ = auxiliary_rates(counts, latents.inherit, latents.weight, latents.source,
                                        latents.alpha.shape[0])
    weights_given_auxiliaries(used, log_rate, latents, settings)


def weights_given_auxiliaries(used, log_rate, latents: Latents, settings: Settings):
    """Step 6 given the auxiliaries V (``auxiliary_rates``' m_k and log rates): alpha, when sampled,
    with w integrated out (``compiled.alpha_given_auxiliaries``); then w (``_draw_weights``); in place."""
    alpha, source = latents.alpha, latents.source
    if settings.sample_alpha:
        layout = (source, latents.coeffs, settings.q, settings.atoms_per_source)
        alpha_given_auxiliaries(alpha, (used, log_rate), layout, (settings.alpha_shape, settings.alpha_rate),
                                _walk(alpha.shape[0], settings.alpha_step))
    _draw_weights(used, log_rate, source, alpha, settings.atoms_per_source, latents.weight)


@compiled
def seed(value):  # pragma: no cover (compiled)
    """Seed numba's generator, which every compiled step of this thread draws from."""
    np.random.seed(value)


@compiled
def _atom_inputs(step, alpha, weight, coeffs, q, atoms_per_source, collapsed):  # pragma: no cover (compiled)
    """``move_atoms``'s (weight_prior, uniforms, coefficients) for step 2 or 5: ln Gamma(w_k; alpha_j / L, 1)
    where step 5 scores owners, uniforms from numba's generator, and alpha_s q_ts in place of c when
    ``collapsed``."""
    t_count, s_count = q.shape
    k_count = weight.shape[0]
    prior = np.zeros((k_count, s_count))
    for k in range(k_count if step == 5 else 0):
        for j in range(s_count):
            prior[k, j] = _gamma_log_density(weight[k], alpha[j] / atoms_per_source)
    uniforms = np.empty((k_count, t_count + 1))
    for k in range(k_count):
        for t in range(t_count + 1):
            uniforms[k, t] = np.random.random()
    if not collapsed:
        return prior, uniforms, coeffs  # (move_atoms only reads them)
    given = np.empty(q.shape)
    for t in range(t_count):
        for j in range(s_count):
            given[t, j] = alpha[j] * q[t, j]
    return prior, uniforms, given


def _count_step(step, counts, latents: Latents, settings: Settings, log_q, log_not_q, collapsed):
    """Step 2, 5, 3 or 6 on the mixture counts m_tk (T, K), through which alone they see the labels,
    on the ``latents``, updated in place; ``collapsed``: steps 2 and 5 with the coefficients
    integrated out (then step 3 must follow them). The drivers here are Python over compiled steps: a
    compiled driver recompiles every step it calls (about 3 s more on a first fit) and saves nothing
    measurable (a few microseconds a call)."""
    alpha, source, weight, coeffs, inherit = latents
    if step in ATOM_STEPS:
        prior, uniforms, given = _atom_inputs(step, alpha, weight, coeffs, settings.q, settings.atoms_per_source,
                                              collapsed)
        move_atoms((counts, inherit, source, weight), given, (log_q, log_not_q, prior), uniforms, step == 5, collapsed)
    elif step == 3:
        _coefficients(counts, inherit, weight, source, alpha, settings.q, coeffs)
    elif step == 6:
        _weights(counts, latents, settings)


def count_sweeps(counts, latents: Latents, settings: Settings, steps, seed_value):
    """``steps`` (2, 3, 5, 6: COUNT_STEPS) on fixed mixture counts (T, K), the labels per group or the
    document level's tables, steps 2 and 5 given the coefficients (as ``gibbs``'s steps); the
    ``latents`` updated in place, ``seed_value`` seeds numba's generator."""
    seed(seed_value)
    log_q, log_not_q = log_array(settings.q), _log_complement(settings.q)
    for step in steps:
        _count_step(step, counts, latents, settings, log_q, log_not_q, False)


def sweeps(words: Words, z, latents: Latents, settings: Settings, steps, count, seed_value):
    """``count`` sweeps of ``steps`` (numbers of [Coupled-DP] section 4's steps, ``STEPS`` for a whole
    sweep) on the cells' label counts z and the ``latents``, updated in place; ``seed_value`` seeds
    numba's generator."""
    seed(seed_value)
    t_count = latents.inherit.shape[0]
    log_q, log_not_q = log_array(settings.q), _log_complement(settings.q)
    counts = _label_counts(words.groups, z, t_count)
    for _ in range(count):
        for step in steps:
            if step == 1:
                mixing = _mixing(latents.coeffs, latents.inherit, latents.weight, latents.source)
                draw_cell_labels(words.x, words.groups, z, mixing, words.vocab, words.beta)
                counts = _label_counts(words.groups, z, t_count)
            else:
                _count_step(step, counts, latents, settings, log_q, log_not_q, True)
