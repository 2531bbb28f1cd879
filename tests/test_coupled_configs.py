"""Configurations of [Coupled-DP] section 5, and the SNGP reduction of section 3.2."""

import pyro
import pytest
import torch

from bnpzoo.models.coupled_configs import inheritance_matrix
from bnpzoo.models.coupled_dp import mixing_weights, model


def test_named_configurations_follow_section_5():
    assert torch.equal(inheritance_matrix("s-ldp", 3), torch.full((3, 1), 0.5, dtype=torch.float64))
    m = inheritance_matrix("m-ldp", 4, sigma=2.0)
    assert m.shape == (4, 5) and torch.allclose(m[0, :4], torch.exp(-torch.arange(4.0, dtype=torch.float64) / 2))
    assert torch.equal(m[:, 4], torch.full((4,), 0.5, dtype=torch.float64))
    assert inheritance_matrix("sngp", 4, sigma=1).tolist()[0] == [1, 1, 0, 0]
    scenes = inheritance_matrix("scenes", 3)
    assert scenes[1].tolist() == [0.2, 1.0, 0.2, 0.5]


@pytest.mark.parametrize("config, options, match", [
    ("nope", {}, "config must be one of"),
    ("m-ldp", {"sigma": 0.0}, "sigma"),
    ([[0.5, 0.5]], {}, "2 rows"),
    ([[0.0, 0.0], [1.0, 0.5]], {}, "positive entry"),
    ([[1.5, 0.0], [1.0, 0.5]], {}, "probabilities"),
])
def test_bad_configurations_are_named(config, options, match):
    with pytest.raises(ValueError, match=match):
        inheritance_matrix(config, 2, **options)


def test_sngp_is_the_unsubsampled_special_case():
    """With q in {0, 1}, every atom of a connected latent DP is inherited and none of the others,
    and D_t = sum_{s in R_t} c_ts H_s (section 3.2)."""
    q = inheritance_matrix("sngp", 4, sigma=1)
    groups = torch.arange(4).repeat_interleave(10)
    trace = pyro.poutine.trace(model).get_trace(None, groups=groups, q=q, atoms_per_source=3, vocab_size=4,
                                                alpha=1.5)
    source, weights = trace.nodes["source"]["value"], trace.nodes["weight"]["value"]
    inherit, coeffs = trace.nodes["inherit"]["value"], trace.nodes["coeffs"]["value"].squeeze(-2)
    assert torch.equal(inherit, q[:, source])
    owner = torch.nn.functional.one_hot(source, 4).to(weights.dtype)
    h = (owner * weights[:, None]) / (owner * weights[:, None]).sum(0)  # H_s over atoms, (K, S)
    owned = owner.sum(0) > 0
    connected = (q > 0) & owned
    c = torch.where(connected, coeffs, torch.zeros_like(coeffs))
    expected = (c / c.sum(1, keepdim=True)) @ torch.where(owned, h, torch.zeros_like(h)).T
    assert torch.allclose(mixing_weights(coeffs, inherit, weights, source, 4), expected)
