"""ArviZ is reached through one module, and reaching it warns about nothing on a fresh machine."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
ARVIZ_IMPORT = re.compile(r"^\s*(import arviz|from arviz\b)", re.MULTILINE)


def test_only_the_diagnostics_module_imports_arviz():
    sources = [p for folder in ("bnpzoo", "models", "guides", "inference", "tests", "tutorials", "benchmarks")
               for p in (ROOT / folder).rglob("*.py")]
    importers = sorted(str(p.relative_to(ROOT)) for p in sources if ARVIZ_IMPORT.search(p.read_text()))
    assert importers == ["bnpzoo/diagnostics.py"]


def test_arviz_imports_silently_with_an_empty_cache_directory(tmp_path):
    # ArviZ 0.23 announces its 1.x refactor once a day, keyed on a stamp in the user's cache:
    # every fresh machine and CI container sees it, and -W error makes it fatal.
    env = {"XDG_CACHE_HOME": str(tmp_path), "HOME": str(tmp_path), "PATH": "",
           **{name: os.environ[name] for name in ("PYTHONPATH", "PYTHONSAFEPATH") if name in os.environ}}
    code = "from bnpzoo.diagnostics import arviz; arviz().rhat"
    run = subprocess.run([sys.executable, "-W", "error", "-c", code], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "arviz").exists()  # the stamp's folder: the notice was due, and silenced


def test_r_hat_tells_chains_stuck_apart_from_chains_at_one_state():
    import numpy as np
    import pytest

    from bnpzoo.base import ConvergenceWarning
    from bnpzoo.diagnostics import RHAT_LIMIT, chain_rhat, check_mixing

    rng = np.random.default_rng(0)
    assert chain_rhat(np.full((4, 50), -5e4) + 1e-8 * rng.standard_normal((4, 50))) == 1.0  # summation order
    stuck = np.repeat([[20.0], [20.0], [20.0], [21.0]], 50, axis=1)  # one chain holds an extra cluster
    assert chain_rhat(stuck) == np.inf
    assert chain_rhat(rng.standard_normal((4, 200))) < RHAT_LIMIT
    with pytest.warns(ConvergenceWarning, match="R-hat of the n clusters is inf"):
        assert check_mixing({"n_clusters": stuck}, ["n_clusters"], 50)["n_clusters"] == np.inf
