"""The house: layering between the rooms, and every path and module the user documents name exists."""

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import bnpzoo
from bnpzoo.base import Estimator

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _estimator_modules() -> set:
    """Every bnpzoo module that defines an estimator class (``base`` too), and the estimators as the
    package exports them (``bnpzoo.DPGMM``, ...)."""
    found = {"bnpzoo.base"} | {f"bnpzoo.{name}" for name in bnpzoo.__all__
                               if inspect.isclass(cls := getattr(bnpzoo, name)) and issubclass(cls, Estimator)}
    for info in pkgutil.iter_modules(bnpzoo.__path__, "bnpzoo."):
        if info.name == "bnpzoo.__main__":  # runs the CLI
            continue
        module = importlib.import_module(info.name)
        classes = inspect.getmembers(module, inspect.isclass)
        if any(issubclass(c, Estimator) and c.__module__ == info.name for _, c in classes):
            found.add(info.name)
    return found


def _imports(path: Path) -> set:
    """The modules (and ``package.name`` for ``from package import name``) a file imports, anywhere in it."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_learner_program_or_guide_imports_an_estimator_module():
    # caller_state is the estimators' guard of the caller's process: the learners' generator helpers are in ops
    estimators = _estimator_modules() | {"bnpzoo.caller_state"}
    assert {"bnpzoo.mixture", "bnpzoo.hdp_gd", "bnpzoo.coupled_dp"} <= estimators  # the finder finds them
    wrong = [f"{path.relative_to(ROOT)} imports {name}"
             for folder in ("inference", "models", "guides") for path in sorted((ROOT / folder).rglob("*.py"))
             for name in _imports(path) if name in estimators or name.rsplit(".", 1)[0] in estimators]
    assert not wrong, wrong


def _documented_names(text: str):
    """Code spans and link targets that name a file or folder of the repository, or a bnpzoo module
    or attribute (``bnpzoo.x.y``, up to an opening bracket)."""
    for span in re.findall(r"`([^`\n]+)`", text) + re.findall(r"\]\(([^)\s]+)\)", text):
        span = span.strip()
        if re.fullmatch(r"bnpzoo(\.\w+)+(\(.*)?", span):
            yield "module", span.split("(")[0]
        elif re.fullmatch(r"(\.\./)?(models|guides|inference|tutorials|tests|benchmarks|docs|bnpzoo|\.ci)(/[\w.\-]*)*",
                          span) or re.fullmatch(r"[\w\-]+\.(md|toml|txt)|Makefile", span):
            yield "path", span


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_and_module_the_documents_name_exists(doc):
    names = list(_documented_names(doc.read_text()))
    if doc.name in ("README.md", "guide.md"):  # the finder finds what these name
        assert sum(kind == "path" for kind, _ in names) >= 3 and any(kind == "module" for kind, _ in names)
    missing = [span for kind, span in names
               if (kind == "path" and not (doc.parent / span).exists() and not (ROOT / span).exists())
               or (kind == "module" and not _resolves(span))]
    assert not missing, f"{doc.name} names what does not exist: {missing}"


MOST_PARAMETERS, MOST_LINES = 8, 60  # issue 63's limits


def _sizes(path: Path):
    """(function name, its class or None, parameters (self aside; *args and **kwargs one each), lines)
    of every function in a file."""
    def visit(node, owner):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = child.args
                count = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
                count -= bool(owner and a.args and a.args[0].arg in ("self", "cls"))
                yield child.name, owner, count, child.end_lineno - child.lineno + 1
                yield from visit(child, None)
            elif isinstance(child, ast.ClassDef):
                yield from visit(child, child.name)
            else:
                yield from visit(child, owner)
    yield from visit(ast.parse(path.read_text()), None)


def test_no_function_takes_more_than_eight_parameters_or_runs_over_sixty_lines():
    """A function's arguments become a few named records, a long function its steps: no function in
    bnpzoo/ or inference/ takes more than 8 parameters or runs over 60 lines, the public estimators'
    constructors excepted (scikit-learn's estimators take every setting there)."""
    over = []
    for path in sorted([*(ROOT / "bnpzoo").rglob("*.py"), *(ROOT / "inference").rglob("*.py")]):
        for name, owner, parameters, lines in _sizes(path):
            if name == "__init__" and owner in bnpzoo.__all__:
                continue
            if parameters > MOST_PARAMETERS or lines > MOST_LINES:
                over.append(f"{path.relative_to(ROOT)}: {owner + '.' if owner else ''}{name} ({parameters} "
                            f"parameters, {lines} lines)")
    assert not over, over
