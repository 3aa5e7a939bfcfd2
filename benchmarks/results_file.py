"""Writing a benchmark's JSON record under a results folder, named by benchmark and UTC time."""

from __future__ import annotations

import datetime
import json
import os


def utc_stamp() -> str:
    """The current UTC time as 20261201T110000Z."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def write_record(out_dir: str, name: str, stamp: str, record: dict) -> str:
    """Write `record` to OUT_DIR/NAME-STAMP.json, print and return the path."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}-{stamp}.json")
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
    print(f"wrote {path}")
    return path
