import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_in_the_wheel():
    """A folder with an __init__.py that pyproject's package list leaves out is missing from the
    wheel: an editable install still imports it, a user's `pip install` does not."""
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = {setup["package-dir"].get(name, name.replace(".", "/")) for name in setup["packages"]}
    found = {str(init.parent.relative_to(ROOT)) for top in set(setup["package-dir"].values())
             for init in (ROOT / top).rglob("__init__.py")}
    assert found <= listed, f"package folders missing from pyproject's packages: {sorted(found - listed)}"
