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
