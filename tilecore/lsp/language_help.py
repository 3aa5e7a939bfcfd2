"""Completion, signature help and go-to-documentation for `T.*`, from the language itself.

Everything comes from `tilecore.language`: its public names, their signatures and
docstrings, so the editor says exactly what the language defines. The documentation
target of an op is its section in docs/language.md when the docs sit next to the
package (a source checkout), and always its definition with the docstring.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
from typing import Dict, List, Optional, Tuple

_CALL_OPEN = re.compile(r"([A-Za-z_][A-Za-z_0-9]*)\s*\.\s*([A-Za-z_][A-Za-z_0-9]*)\s*\($")


@functools.lru_cache(maxsize=1)
def language_names() -> Dict[str, object]:
    """Public name -> object of `tilecore.language` (modules and private names left out)."""
    import tilecore.language as T

    return {
        name: value
        for name, value in sorted(vars(T).items())
        if not name.startswith("_") and not inspect.ismodule(value) and name != "annotations"
    }


def signature_text(name: str, obj) -> str:
    """`T.copy(src, dst, ...)`-style signature, or `T.name` for values without one."""
    target = getattr(obj, "__wrapped__", obj)
    if not callable(target):
        return f"T.{name}"
    try:
        return f"T.{name}{inspect.signature(target)}"
    except (TypeError, ValueError):
        return f"T.{name}(...)"


def doc_text(obj) -> str:
    """The object's docstring (cleaned), or "" when it has none."""
    if isinstance(obj, (str, int, float, bool)):
        return ""
    return inspect.getdoc(getattr(obj, "__wrapped__", obj)) or ""


def kind_of(obj) -> str:
    """ "class", "function" or "constant" (the LSP completion kind chosen by the server)."""
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "constant"


def completions(prefix: str) -> List[Dict[str, str]]:
    """The language's names starting with `prefix`, with signature and docstring."""
    return [
        {"name": name, "kind": kind_of(obj), "detail": signature_text(name, obj), "doc": doc_text(obj)}
        for name, obj in language_names().items()
        if name.startswith(prefix)
    ]


def open_call(text_before: str, aliases) -> Optional[Tuple[str, int, str]]:
    """For the text before the cursor: (op name, index of the argument being written, keyword
    being written or "") of the innermost unclosed `T.op(` call, or None."""
    text_before = text_before[-4000:]  # a call starts within a few lines
    depth, commas, current = 0, 0, None
    for i in range(len(text_before) - 1, -1, -1):
        char = text_before[i]
        if char in ")]}":
            depth += 1
        elif char in "([{" and depth > 0:
            depth -= 1
        elif char in "[{":  # inside a subscript or literal: it belongs to the current argument
            commas, current = 0, None
        elif char == "(":
            match = _CALL_OPEN.search(text_before[: i + 1])
            if not match or match.group(1) not in aliases or match.group(2) not in language_names():
                return None
            argument = current if current is not None else text_before[i + 1 :]
            named = re.match(r"\s*([A-Za-z_][A-Za-z_0-9]*)\s*=(?!=)", argument)
            return match.group(2), commas, named.group(1) if named else ""
        elif char == "," and depth == 0:
            if current is None:
                current = text_before[i + 1 :]
            commas += 1
    return None


def parameters(name: str) -> List[str]:
    """Parameter labels of op `name` as they appear in its signature text."""
    obj = getattr(language_names().get(name), "__wrapped__", language_names().get(name))
    if not callable(obj):
        return []
    try:
        return [str(p) for p in inspect.signature(obj).parameters.values()]
    except (TypeError, ValueError):
        return []


def active_parameter(name: str, index: int, keyword: str) -> int:
    """Which parameter the cursor is in: the keyword's when one is being written."""
    params = parameters(name)
    if keyword:
        for i, label in enumerate(params):
            if label.split("=")[0].split(":")[0].strip("*") == keyword:
                return i
    variadic = next((i for i, p in enumerate(params) if p.startswith("*") and not p.startswith("**")), None)
    if variadic is not None and index >= variadic:
        return variadic
    return min(index, max(len(params) - 1, 0))


def docs_file() -> Optional[str]:
    """docs/language.md next to the installed package (a source checkout), if present."""
    import tilecore

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(tilecore.__file__))), "docs", "language.md")
    return path if os.path.isfile(path) else None


def documentation_locations(name: str) -> List[Tuple[str, int]]:
    """(file, 0-based line) where op `name` is documented: docs/language.md, then its definition."""
    obj = language_names().get(name)
    if obj is None:
        return []
    found = []
    docs = docs_file()
    if docs:
        pattern = re.compile(r"`T\." + re.escape(name) + r"\b")
        with open(docs, encoding="utf-8") as f:
            for number, line in enumerate(f):
                if pattern.search(line):
                    found.append((docs, number))
                    break
    target = inspect.unwrap(obj) if callable(obj) else None
    try:
        file = inspect.getsourcefile(target or type(obj))
        _, first = inspect.getsourcelines(target or type(obj))
        if file is not None:  # None: no source file (a built-in or compiled object)
            found.append((file, max(first - 1, 0)))
    except (TypeError, OSError):
        pass
    return found


_ALIAS_IMPORTS = (
    re.compile(r"^\s*import\s+tilecore\.language\s+as\s+([A-Za-z_]\w*)", re.M),
    re.compile(r"^\s*from\s+tilecore\s+import\s+language\s+as\s+([A-Za-z_]\w*)", re.M),
)


def aliases_in(text: str) -> set:
    """Names a document binds to `tilecore.language` (by its imports; works on broken code too),
    always including the conventional `T`."""
    found = {"T"}
    for pattern in _ALIAS_IMPORTS:
        found.update(pattern.findall(text))
    if re.search(r"^\s*from\s+tilecore\s+import\s+language\s*$", text, re.M):
        found.add("language")
    return found
