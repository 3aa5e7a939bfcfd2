"""`tilecore.compat.tilelang.language` is `tilecore.language` itself (one module object)."""

import sys

from ... import language as _language

sys.modules[__name__] = _language
