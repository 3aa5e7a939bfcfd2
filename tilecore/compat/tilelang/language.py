"""`tilecore.compat.tilelang.language` is `tilecore.language` itself (one module object).

Its submodules that TileLang files import by name (`tilelang.language.fp8`) are
`tilecore.language`'s own, registered under this name too so they load once.
"""

import sys

from ... import language as _language
from ...language import fp8 as _fp8

sys.modules[__name__] = _language
sys.modules[__name__ + ".fp8"] = _fp8
