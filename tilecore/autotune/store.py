"""The tuning cache: the winning configuration per tuning key, one JSON file each.

It lives in the compile cache's folder (`autotune/` under $TILECORE_CACHE_DIR or
~/.cache/tilecore) and is off when TILECORE_CACHE=0. Writes go through a
temporary file and os.replace, so a reader never sees half an entry; an
unreadable entry is ignored (the kernel is tuned again).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from typing import Any, Dict, Optional

log = logging.getLogger("tilecore.autotune")
FORMAT = "tilecore-tuning 1"


def tuning_key(parts: Dict[str, Any]) -> str:
    """The hex sha256 of `parts` (JSON-able), order-independent."""
    from ..runtime.cache import canonical_encoding

    text = json.dumps(canonical_encoding(parts), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class TuningStore:
    """Winning configurations on disk, by tuning key."""

    def __init__(self, root: Optional[str] = None):
        from ..runtime.cache import cache_dir

        self.root = root or os.path.join(cache_dir(), "autotune")

    def path(self, key: str) -> str:
        return os.path.join(self.root, key[:2], key + ".json")

    def get(self, key: str) -> Optional[Dict[str, Any]]:
        """The stored record for `key` ({"config": ..., ...}), or None."""
        try:
            with open(self.path(key), encoding="utf-8") as f:
                record = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as err:
            log.warning("tilecore autotune: ignoring unreadable tuning entry %s (%s)", self.path(key), err)
            return None
        if not isinstance(record, dict) or record.get("format") != FORMAT or not isinstance(record.get("config"), dict):
            return None
        return record

    def put(self, key: str, record: Dict[str, Any]) -> bool:
        """Store `record` (its "config" must be JSON-able); False when it cannot be written."""
        record = dict(record, format=FORMAT)
        try:
            text = json.dumps(record, sort_keys=True, indent=1)
        except (TypeError, ValueError) as err:
            log.warning("tilecore autotune: the winning config is not JSON-able (%s); not cached", err)
            return False
        path = self.path(key)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        except OSError as err:
            log.warning("tilecore autotune: cannot write %s (%s)", path, err)
            return False
        return True
