"""The coupled latent-DP program ([Coupled-DP] eq. (6)-(8)): generation and D_t's weights."""

import pyro
import pytest
import torch

from bnpzoo.models.coupled_dp import mixing_weights, model


def _trace(**kw):
    return pyro.poutine.trace(model).get_trace(None, **kw)


@pytest.mark.parametrize("family, extra", [("categorical", dict(vocab_size=7)), ("gaussian", dict(dim=3))])
def test_the_program_generates_each_family(family, extra):
    groups = torch.arange(3).repeat_interleave(40)
    q = torch.tensor([[1.0, 0.2], [0.5, 0.5], [0.2, 1.0]])
    trace = _trace(groups=groups, q=q, atoms_per_source=5, family=family, **extra)
    x, z = trace.nodes["x"]["value"], trace.nodes["z"]["value"]
    assert z.shape == (120,) and int(z.max()) < 10
    assert x.shape == ((120,) if family == "categorical" else (120, 3))
    inherit = trace.nodes["inherit"]["value"]
    groups_used = inherit[groups, z]
    # every observation comes from an atom its group inherits (unless the group inherits none)
    assert bool(((groups_used == 1) | (inherit.sum(1)[groups] == 0)).all())
    assert torch.isfinite(trace.log_prob_sum())


def test_weights_sum_to_one_and_follow_eq_7():
    coeffs = torch.tensor([[0.7, 0.3], [0.5, 0.5]])
    source = torch.tensor([0, 0, 1, 1])
    weights = torch.tensor([1.0, 3.0, 2.0, 2.0])
    inherit = torch.tensor([[1.0, 1.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    probs = mixing_weights(coeffs, inherit, weights, source, 2)
    # group 0: 0.7 of H_1 (1:3) and 0.3 of H_2 restricted to atom 2
    assert torch.allclose(probs[0], torch.tensor([0.7 / 4, 0.7 * 3 / 4, 0.3, 0.0]))
    # group 1 inherits nothing from H_2: that source drops out and H_1's share renormalises
    assert torch.allclose(probs[1], torch.tensor([0.0, 1.0, 0.0, 0.0]))


def test_a_group_that_inherits_nothing_takes_every_atom():
    coeffs = torch.tensor([[0.25, 0.75]])
    source = torch.tensor([0, 1, 1])
    weights = torch.tensor([2.0, 1.0, 3.0])
    probs = mixing_weights(coeffs, torch.zeros(1, 3), weights, source, 2)
    assert torch.allclose(probs[0], torch.tensor([0.25, 0.75 / 4, 0.75 * 3 / 4]))


def test_one_latent_dp_inherited_in_full_is_that_dp_in_every_group():
    """q = 1 with one source: D_t = H_1 for every t, whatever c_t."""
    groups = torch.arange(4).repeat_interleave(5)
    trace = _trace(groups=groups, q=torch.ones(4, 1), atoms_per_source=6, vocab_size=5)
    weights = trace.nodes["weight"]["value"]
    probs = mixing_weights(trace.nodes["coeffs"]["value"].squeeze(-2), trace.nodes["inherit"]["value"], weights,
                           trace.nodes["source"]["value"], 1)
    assert torch.allclose(probs, (weights / weights.sum()).expand(4, 6))


def test_a_source_that_owns_no_atom_drops_out():
    coeffs = torch.tensor([[0.6, 0.4]])
    probs = mixing_weights(coeffs, torch.ones(1, 2), torch.tensor([1.0, 3.0]), torch.tensor([1, 1]), 2)
    assert torch.allclose(probs[0], torch.tensor([0.25, 0.75]))


def test_unconnected_sources_are_allowed_and_bad_q_is_refused():
    """SNGP sets q_ts = 0 outside a window; such sources never reach the group."""
    q = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    groups = torch.arange(3).repeat_interleave(30)
    trace = _trace(groups=groups, q=q, atoms_per_source=4, vocab_size=5)
    source, z = trace.nodes["source"]["value"], trace.nodes["z"]["value"]
    assert torch.isfinite(trace.log_prob_sum())
    assert not bool((source[z[:30]] == 1).any()) and not bool((source[z[60:]] == 0).any())
    with pytest.raises(ValueError, match="positive entry"):
        _trace(groups=groups, q=torch.tensor([[0.0, 0.0], [1.0, 1.0], [1.0, 0.0]]), vocab_size=5)
