"""An estimator's parameters and fitted attributes as its docstring describes them: the one source of
the CLI's help (``bnpzoo.registry``) and of the reference's lists (``docs/conf.py``).

The docstrings write an entry as ``name : text`` (or ``name, other : text`` for several) at the start
of an indented line, its text running on over more deeply indented lines, in sections headed by a
title underlined with dashes ("Parameters (keyword-only)", "Fitted attributes"); entries before the
first title are parameters."""

import inspect
import re

ENTRY = re.compile(r"^(?P<indent>\s*)(?P<names>[A-Za-z_][A-Za-z0-9_]*(?:, [A-Za-z_][A-Za-z0-9_]*)*) : (?P<text>.*)$")
UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
PARAMETERS, FITTED = "Parameters", "Fitted attributes"


def heading(lines: list[str], number: int) -> bool:
    """Whether line ``number`` is a section's title (underlined with dashes on the next line)."""
    return number + 1 < len(lines) and bool(lines[number].strip()) and bool(UNDERLINE.match(lines[number + 1]))


def entries(doc: str):
    """(section, names, text on one line, first line, last line) of every entry in ``doc``."""
    lines, found, section = (doc or "").splitlines(), [], PARAMETERS
    current = indent = None
    for number, line in enumerate(lines):
        match = ENTRY.match(line)
        if heading(lines, number):
            section, current = line.strip(), None
        elif match:
            current, indent = [section, match["names"].split(", "), match["text"].strip(), number, number], \
                len(match["indent"])
            found.append(current)
        elif current and line.strip() and len(line) - len(line.lstrip()) > indent:
            current[2] += " " + line.strip()
            current[4] = number
        else:
            current = None
    return [tuple(entry) for entry in found]


def texts(cls, section: str = PARAMETERS) -> dict[str, str]:
    """name -> the whole text of its entry, on one line, in the sections of ``cls``' docstring whose
    title starts with ``section``."""
    return {name: text for title, names, text, *_ in entries(cls.__doc__) if title.startswith(section)
            for name in names}


def parameter_texts(cls) -> dict[str, str]:
    """name -> the whole text of its parameter entry in ``cls``' docstring."""
    return texts(cls, PARAMETERS)


def shared_entries(text: str, keep) -> str:
    """The entries of ``text`` (an entry block shared by several estimators) that describe a name in
    ``keep``, whole lines as written."""
    lines = text.splitlines()
    kept = [lines[first:last + 1] for _, names, _, first, last in entries(text) if set(names) & set(keep)]
    return "\n" + "\n".join(line for block in kept for line in block) + "\n"


def undocumented(cls, shared: str, fitted: str) -> str:
    """What ``cls``' docstring gains from the shared blocks: the entries of ``shared`` for the
    parameters its ``__init__`` takes and it does not describe itself, then a "Fitted attributes"
    section of the entries of ``fitted`` that it has (``_fitted_attributes``, properties, and
    ``tensors_``, which every estimator has)."""
    own = parameter_texts(cls)
    taken = [name for name in inspect.signature(cls).parameters if name not in own]
    has = [name for _, names, *_ in entries(fitted) for name in names
           if name in (*cls._fitted_attributes, "tensors_") or isinstance(getattr(cls, name, None), property)]
    return shared_entries(shared, taken) + f"\n    {FITTED}\n    {'-' * len(FITTED)}" + shared_entries(fitted, has)


def first_sentence(text: str, limit: int = 200) -> str:
    """Up to the first full stop that ends a sentence (not one inside ``code`` nor after "e.g", "i.e",
    "eq" or "cf"), at most ``limit`` characters, with ``code`` written as code."""
    outside_code = re.sub(r"``[^`]*``", lambda m: "_" * len(m.group()), text)
    end = re.search(r"(?<!e\.g)(?<!i\.e)(?<!eq)(?<!cf)\.(\s|$)", outside_code)
    sentence = (text[: end.start() + 1] if end else text).replace("``", "")
    return sentence if len(sentence) <= limit else sentence[: limit - 3].rsplit(" ", 1)[0] + "..."
