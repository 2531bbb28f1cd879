"""An estimator's parameters as its docstring describes them: the one source of the CLI's help
(``bnpzoo.registry``) and of the reference's parameter lists.

The docstrings write a parameter as ``name : text`` (or ``name, other : text`` for several) at the
start of an indented line, its text running on over more deeply indented lines."""

import re

ENTRY = re.compile(r"^(?P<indent>\s*)(?P<names>[a-z_][a-z0-9_]*(?:, [a-z_][a-z0-9_]*)*) : (?P<text>.*)$")


def parameter_texts(cls) -> dict[str, str]:
    """name -> the whole text of its entry in ``cls``' docstring, on one line."""
    texts, current, indent = {}, None, 0
    for line in (cls.__doc__ or "").splitlines():
        match = ENTRY.match(line)
        if match:
            current, indent = match["names"].split(", "), len(match["indent"])
            for name in current:
                texts[name] = match["text"].strip()
        elif current and line.strip() and len(line) - len(line.lstrip()) > indent:
            for name in current:
                texts[name] += " " + line.strip()
        else:
            current = None
    return texts


def first_sentence(text: str, limit: int = 200) -> str:
    """Up to the first full stop that ends a sentence (not one inside ``code`` nor after "e.g", "i.e",
    "eq" or "cf"), at most ``limit`` characters, with ``code`` written as code."""
    outside_code = re.sub(r"``[^`]*``", lambda m: "_" * len(m.group()), text)
    end = re.search(r"(?<!e\.g)(?<!i\.e)(?<!eq)(?<!cf)\.(\s|$)", outside_code)
    sentence = (text[: end.start() + 1] if end else text).replace("``", "")
    return sentence if len(sentence) <= limit else sentence[: limit - 3].rsplit(" ", 1)[0] + "..."
