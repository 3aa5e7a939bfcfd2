"""Runtime: the compile flow (api), Kernel objects, array adapters, the on-disk cache."""

from .api import compile, default_target, jit, lower, trace  # noqa: F401
from .kernel import Kernel  # noqa: F401
