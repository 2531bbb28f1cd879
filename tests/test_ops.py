import torch

from bnpzoo.ops import default_sigma, spherical_normal_log_density, squared_distances, stick_breaking_log_weights


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
    assert torch.allclose(spherical_normal_log_density(x, mu, 0.7), ref)


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
