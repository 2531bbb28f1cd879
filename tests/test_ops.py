import pytest
import torch

from bnpzoo.distributions import GeneralizedGaussian
from bnpzoo.ops import (BLOCK_ENTRIES, DEVICE_BLOCK_ENTRIES, default_sigma, generalized_gaussian_log_density,
                        generalized_gaussian_shape, relative_spreads, row_blocks, squared_distances,
                        stick_breaking_log_weights, stick_parameters)


def test_stick_breaking_weights_sum_to_one_and_match_the_product_form():
    v = torch.tensor([0.3, 0.5, 0.9], dtype=torch.float64)
    w = stick_breaking_log_weights(v).exp()
    expected = torch.tensor([0.3, 0.7 * 0.5, 0.7 * 0.5 * 0.9, 0.7 * 0.5 * 0.1], dtype=torch.float64)
    assert torch.allclose(w, expected)
    assert torch.isclose(w.sum(), torch.tensor(1.0, dtype=torch.float64))


def test_distances_and_log_density_match_the_direct_formula():
    x, mu = torch.randn(7, 3, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64)
    direct = ((x[:, None] - mu[None]) ** 2).sum(-1)
    assert torch.allclose(squared_distances(x, mu), direct)
    ref = torch.distributions.Normal(mu[None], 0.7).log_prob(x[:, None]).sum(-1)
    assert torch.allclose(generalized_gaussian_log_density(x, mu, 0.7), ref)
    per_feature = torch.tensor([0.5, 2.0, 30.0], dtype=torch.float64)
    ref = torch.distributions.Normal(mu[None], per_feature).log_prob(x[:, None]).sum(-1)
    assert torch.allclose(generalized_gaussian_log_density(x, mu, per_feature), ref)


@pytest.mark.parametrize("rho", [1.0, 1.5, 3.0])
def test_generalized_gaussian_table_matches_the_distribution_per_pair(rho):
    x, mu = torch.randn(7, 3, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64)
    std = torch.tensor([0.5, 2.0, 1.3], dtype=torch.float64)
    s = generalized_gaussian_shape(std, rho)
    direct = GeneralizedGaussian(mu[None], s, torch.tensor(rho, dtype=torch.float64)).log_prob(x[:, None]).sum(-1)
    assert torch.allclose(generalized_gaussian_log_density(x, mu, std, rho), direct)
    assert torch.allclose(GeneralizedGaussian(0.0, s, torch.tensor(rho, dtype=torch.float64)).variance, std**2)


def test_pitman_yor_stick_parameters():
    a, b = stick_parameters(4, 2.0, 0.25, like=torch.zeros(1))
    assert torch.equal(a, torch.full((4,), 0.75)) and torch.allclose(b, torch.tensor([2.25, 2.5, 2.75, 3.0]))
    a, b = stick_parameters(3, 1.5, 0.0, like=torch.zeros(1))
    assert torch.equal(a, torch.ones(3)) and torch.equal(b, torch.full((3,), 1.5))


def test_relative_spreads_scale_down_only_the_features_far_wider_than_the_median():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(5000, 5, generator=gen, dtype=torch.float64) * torch.tensor([1.0, 1.5, 0.01, 1.0, 1000.0],
                                                                               dtype=torch.float64)
    r = relative_spreads(x)
    assert torch.equal(r[:4], torch.ones(4, dtype=torch.float64))  # narrow ones are not blown up
    assert abs(float(r[4]) - 1000 / 2.0) < 25  # the wide one comes down to twice the median
    assert torch.equal(relative_spreads(torch.ones(10, 3)), torch.ones(3))


def test_default_sigma_takes_the_smaller_of_the_spread_and_the_within_cluster_scales():
    x = 3.0 * torch.randn(20000, 5, dtype=torch.float64)
    one = torch.zeros(20000, dtype=torch.long)
    # a single cluster: both terms are the per-dimension variance 9 (times 3 for the second)
    assert abs(default_sigma(x, x.mean(0, keepdim=True), one).item() - 3.0) < 0.1
    # two far-apart compact clusters: the within-cluster term (3 * 9) wins over the spread
    labels = torch.arange(20000) % 2
    centres = torch.tensor([[-100.0] * 5, [100.0] * 5], dtype=torch.float64)
    y = x + centres[labels]
    assert abs(default_sigma(y, centres, labels).item() ** 2 - 27.0) < 1.5
    assert torch.isclose(default_sigma(10 * y, 10 * centres, labels), 10 * default_sigma(y, centres, labels))


def test_in_place_softmax_matches_torch_and_keeps_extreme_rows_finite():
    from bnpzoo.ops import softmax_

    table = torch.tensor([[0.0, 1.0, 2.0], [1e4, -1e4, 0.0], [-500.0, -501.0, -900.0]])
    expected = torch.softmax(table, 1)
    result = softmax_(table.clone())
    assert torch.allclose(result, expected, atol=1e-30)
    assert torch.allclose(result.sum(1), torch.ones(3))


def test_row_blocks_cover_the_rows_once_in_blocks_sized_to_the_device():
    for device, entries in ((None, BLOCK_ENTRIES), ("cpu", BLOCK_ENTRIES), ("cuda", DEVICE_BLOCK_ENTRIES)):
        blocks = row_blocks(10_000_000, 100, device=device)
        assert blocks[0] == slice(0, entries // 100) and blocks[-1].stop == 10_000_000
        assert all(a.stop == b.start for a, b in zip(blocks, blocks[1:]))
    assert row_blocks(5, 10**9) == [slice(i, i + 1) for i in range(5)]  # at least one row a block
