"""Python AST -> Tile IR, with a source span on every node."""

from .parser import parse_function, parse_source  # noqa: F401
