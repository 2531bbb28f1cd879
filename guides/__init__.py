"""Hand-written guides (``bnpzoo.guides``): ``stick_mixture`` for every stick-breaking mixture
(``models.dp_gmm``, ``models.pyp_ggm``, ``models.bernoulli_mixture`` and copies of them), and
``hdp_gd`` for ``models.hdp_gd``. The coupled model's sampler needs none."""
