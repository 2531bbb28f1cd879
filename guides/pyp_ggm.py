"""Guides for ``bnpzoo.models.pyp_ggm``: latent sites ``v`` (sticks) and ``mu`` (the means B), shared
by every stick-breaking mixture (``guides.stick_mixture``, where they are written out). The
natural-gradient guide applies only at rho = 2, where the means' posterior is conjugate."""

from bnpzoo.guides.stick_mixture import map_guide, mean_field_guide, natural_guide

__all__ = ["map_guide", "mean_field_guide", "natural_guide"]
