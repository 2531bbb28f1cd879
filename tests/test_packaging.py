import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _folder(package: str, mapped: dict) -> str:
    """The folder of ``package`` as setuptools finds it: the longest mapped parent, then the rest."""
    parent = max((name for name in mapped if package == name or package.startswith(name + ".")), key=len, default="")
    rest = package[len(parent):].lstrip(".").replace(".", "/")
    return "/".join(part for part in (mapped.get(parent, ""), rest) if part)


def test_every_package_folder_is_in_the_wheel():
    """A folder with an __init__.py that pyproject's package list leaves out is missing from the
    wheel: an editable install still imports it, a user's `pip install` does not."""
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = {_folder(name, setup["package-dir"]) for name in setup["packages"]}
    found = {str(init.parent.relative_to(ROOT)) for top in set(setup["package-dir"].values())
             for init in (ROOT / top).rglob("__init__.py")}
    assert found <= listed, f"package folders missing from pyproject's packages: {sorted(found - listed)}"
