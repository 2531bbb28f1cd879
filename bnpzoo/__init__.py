"""bnpzoo: Bayesian nonparametric mixture models as Pyro programs, with their papers' learners."""

from bnpzoo.threads import prefer_passive_wait

prefer_passive_wait()  # before anything imports torch (``bnpzoo.threads``)

from bnpzoo.progress import quietly_import_pyro  # noqa: E402

quietly_import_pyro()  # in Jupyter without ipywidgets, without tqdm's warning (``bnpzoo.progress``)

from bnpzoo.base import ConvergenceWarning  # noqa: E402
from bnpzoo.coupled_dp import CoupledDP  # noqa: E402
from bnpzoo.diagnostics import compare  # noqa: E402
from bnpzoo.dp_bmm import DPBMM  # noqa: E402
from bnpzoo.dp_gmm import DPGMM  # noqa: E402
from bnpzoo.hdp_gd import HDPGD  # noqa: E402
from bnpzoo.inference.data_parallel import rank_rows  # noqa: E402
from bnpzoo.mixture import MixtureSVI  # noqa: E402
from bnpzoo.pyp_ggm import PYPGGM  # noqa: E402

__version__ = "0.1.0"
__all__ = ["ConvergenceWarning", "CoupledDP", "DPBMM", "DPGMM", "HDPGD", "MixtureSVI", "PYPGGM", "compare", "rank_rows",
           "__version__"]
