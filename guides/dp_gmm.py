"""Guides for ``bnpzoo.models.dp_gmm``: latent sites ``v`` (sticks) and ``mu`` (means), shared by
every stick-breaking mixture (``guides.stick_mixture``, where they are written out)."""

from bnpzoo.guides.stick_mixture import map_guide, mean_field_guide, natural_guide

__all__ = ["map_guide", "mean_field_guide", "natural_guide"]
