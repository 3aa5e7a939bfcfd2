"""Tile IR: nodes, dtypes, traversal; printer and JSON form in their own modules."""
from .nodes import *  # noqa: F401,F403
from .nodes import TILE_IR_VERSION  # noqa: F401
from .types import DTYPES, normalize_dtype, promote  # noqa: F401
from .visitor import Transformer, children, substitute, walk, walk_stmts  # noqa: F401
