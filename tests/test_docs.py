"""The documentation site builds with no Sphinx warning (a broken reference, a docstring that is not
valid reST, a missing page fails here, as in ``make docs``), and its API reference shows every public
estimator's every parameter and every attribute a fit sets."""

import inspect
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bnpzoo
from bnpzoo.data import blobs, hdp_gd_sample
from bnpzoo.models.dp_gmm import model as dp_gmm_model

ROOT = Path(__file__).resolve().parents[1]
ESTIMATORS = [getattr(bnpzoo, name) for name in bnpzoo.__all__ if inspect.isclass(getattr(bnpzoo, name))
              and hasattr(getattr(bnpzoo, name), "fit")]


def _site(tmp_path_factory):
    """The site built from a copy of its sources, the tutorials as committed (without outputs, which
    ``make docs`` adds by executing them first)."""
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("site")
    shutil.copytree(ROOT / "docs", source / "docs", ignore=shutil.ignore_patterns("tutorials"))
    shutil.copytree(ROOT / "benchmarks" / "reports", source / "benchmarks" / "reports")
    (source / "docs" / "tutorials").mkdir()
    for notebook in (ROOT / "tutorials").glob("[0-9]*.ipynb"):
        shutil.copy(notebook, source / "docs" / "tutorials")
    run = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-c", str(source / "docs"),
                          "-b", "html", str(source), str(out)], capture_output=True, text=True, timeout=600)
    return run, out


def _page(out, cls):
    return (out / "docs" / "reference" / f"{cls.__name__.lower()}.html").read_text()


def _shown(html, name):
    return re.search(rf'<span class="pre">{re.escape(name)}</span>', html) is not None


def _fitted():
    X = blobs(n=300, d=2, k=3, seed=4).X
    grouped = hdp_gd_sample(n=200, seed=1, relevant=2, irrelevant=1)
    return {bnpzoo.DPGMM: lambda: bnpzoo.DPGMM(max_iter=20, random_state=0).fit(X),
            bnpzoo.PYPGGM: lambda: bnpzoo.PYPGGM(max_iter=20, random_state=0).fit(X),
            bnpzoo.DPBMM: lambda: bnpzoo.DPBMM(max_iter=20, random_state=0).fit((X > 0).astype(np.float32)),
            bnpzoo.MixtureSVI: lambda: bnpzoo.MixtureSVI(model=dp_gmm_model, max_iter=20, random_state=0).fit(X),
            bnpzoo.HDPGD: lambda: bnpzoo.HDPGD(max_iter=5, random_state=0).fit(grouped.X, grouped.groups),
            bnpzoo.CoupledDP: lambda: bnpzoo.CoupledDP(max_iter=4, warmup=2, random_state=0).fit(
                [["apple", "pear"], ["pear", "plum"], ["stone", "rock"], ["rock", "sand"]] * 5, np.arange(20) % 2)}


@pytest.mark.filterwarnings("ignore")
def test_the_site_builds_without_a_warning_and_its_reference_shows_everything(tmp_path_factory):
    """One test, so that a run with several xdist workers builds the site once. Every parameter of
    every public estimator, and whatever a fit sets (its public attributes ending in "_", the tensors
    behind them), not a list kept beside the code, is on its reference page."""
    run, out = _site(tmp_path_factory)
    assert run.returncode == 0 and "WARNING" not in run.stderr and "ERROR" not in run.stderr, run.stderr[-3000:]
    for page in ("index.html", "docs/index.html", "docs/guide.html", "docs/reference/dpgmm.html",
                 "docs/tutorials/00_quickstart.html", "benchmarks/reports/priors.html"):
        assert (out / page).exists(), page
    fits = _fitted()
    for cls in ESTIMATORS:
        html = _page(out, cls)
        missing = [name for name in inspect.signature(cls).parameters if not _shown(html, name)]
        assert not missing, f"{cls.__name__}'s reference lacks the parameters {missing}"
        fitted = fits[cls]()
        names = {name for name in vars(fitted) if name.endswith("_") and not name.startswith("_")}
        names |= set(getattr(fitted, "tensors_", {}))
        missing = sorted(name for name in names if not _shown(html, name))
        assert not missing, f"{cls.__name__}'s reference lacks the fitted attributes {missing}"
