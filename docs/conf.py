"""The documentation site (Sphinx): ``make docs`` builds it into build/docs/ (README, "Documentation").

The API reference is the estimators' docstrings; ``bnpzoo.docstrings`` reads their entries (the CLI's
help reads the same ones) and ``as_rest`` below lays each section out as a definition list. The
tutorials are the notebooks ``make notebooks`` executed (``docs/tutorials/``, not committed), shown
with their outputs and figures as they ran."""

import os

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from bnpzoo import __version__
from bnpzoo.docstrings import entries, heading

project = "bnpzoo"
author = "the bnpzoo developers"
copyright = "2026, " + author
release = version = __version__

extensions = ["sphinx.ext.autodoc", "myst_nb"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
# the repository is the source folder (sphinx-build -c docs . build/docs), so that the guide's links
# to the benchmark reports are the same paths on GitHub and on the site
root_doc = "docs/index"
include_patterns = ["docs/**", "benchmarks/reports/*.md", "benchmarks/reports/*.png"]
exclude_patterns = ["docs/notebooks.py", "docs/conf.py", "docs/architecture_svg.py"]
html_extra_path = ["_root"]  # index.html at the site's top, pointing to docs/index.html
nb_execution_mode = "off"  # executed once, by `make notebooks` (tests/test_notebooks.py runs them too)
nb_output_stderr = "remove-warn"  # none is expected: docs/notebooks.py fails a notebook that prints one
nb_merge_streams = True  # the prints of a cell in one block, as Jupyter shows them
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"bnpzoo {version}"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "inherited-members": True, "undoc-members": False,
                           "exclude-members": "get_params, set_params"}
autodoc_typehints = "none"


def as_rest(lines: list[str]) -> list[str]:
    """A bnpzoo docstring as reST: each titled section a rubric, each ``name : text`` entry a
    definition (the names in code, the text on one line)."""
    found = {first: (names, text, last) for _, names, text, first, last in entries("\n".join(lines))}
    out, number = [], 0
    while number < len(lines):
        line = lines[number]
        if heading(lines, number):
            out += [f".. rubric:: {line.strip()}", ""]
            number += 2
        elif number in found:
            names, text, last = found[number]
            indent = " " * (len(line) - len(line.lstrip()))
            out += [indent + ", ".join(f"``{name}``" for name in names), indent + "    " + text]
            number = last + 1
        else:
            out.append(line)
            number += 1
    return out


def _process(app, what, name, obj, options, lines):
    lines[:] = as_rest(lines)


def _methods_only(app, what, name, obj, skip, options):
    """A class's members are its methods: its fitted attributes (descriptors and properties) are
    listed by its docstring's "Fitted attributes" section."""
    if what == "class" and not callable(obj) and not isinstance(obj, (classmethod, staticmethod)):
        return True
    return None


class CommandHelp(SphinxDirective):
    """``{command-help} MODEL``: what ``bnpzoo fit MODEL --help`` prints (``main`` with no MODEL:
    ``bnpzoo --help``), from the parsers themselves, so the page cannot drift from the tool."""

    optional_arguments = 1

    def run(self):
        from bnpzoo import cli

        os.environ["COLUMNS"] = "88"  # argparse wraps to the terminal's width: the page's here
        parser = cli.model_parser(self.arguments[0]) if self.arguments else cli.build_parser()
        block = nodes.literal_block(text=parser.format_help())
        block["language"] = "text"
        return [block]


def setup(app):
    app.add_directive("command-help", CommandHelp)
    app.connect("autodoc-process-docstring", _process)
    app.connect("autodoc-skip-member", _methods_only)
