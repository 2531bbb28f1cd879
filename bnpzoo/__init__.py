"""bnpzoo: Bayesian nonparametric mixture models as Pyro programs, with their papers' learners."""

from bnpzoo.coupled_dp import CoupledDP
from bnpzoo.diagnostics import compare
from bnpzoo.dp_gmm import DPGMM
from bnpzoo.hdp_gd import HDPGD
from bnpzoo.mixture import MixtureSVI
from bnpzoo.pyp_ggm import PYPGGM

__version__ = "0.1.0"
__all__ = ["CoupledDP", "DPGMM", "HDPGD", "MixtureSVI", "PYPGGM", "compare", "__version__"]
