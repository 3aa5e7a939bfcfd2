"""One line per row of a JSON-lines results file (cuda_ws_compare.py's): the size, the
configuration, the dtype and each field whose name ends in one of the given suffixes.

    python benchmarks/jsonl_table.py RESULTS.jsonl _vs_cublas _vs_cudnn _rel_err
"""

from __future__ import annotations

import json
import sys


def row_line(row: dict, suffixes) -> str:
    """The table line of one result row: numbers to 4 significant digits, other values as written."""
    keys = [k for k in row if k.endswith(tuple(suffixes))]
    fields = " ".join(f"{k}={row[k]:.4g}" if isinstance(row[k], float) else f"{k}={row[k]}" for k in keys)
    tree = f"{row['tree']} " if "tree" in row else ""  # gpu_steps.sh bars: which tile-cuda
    return f"{tree}{row.get('n', row.get('S'))} {row.get('cfg')} {row.get('dtype', '')} {fields}"


if __name__ == "__main__":
    path, *suffixes = sys.argv[1:]
    with open(path) as f:
        for line in f:
            if line.strip():
                print(row_line(json.loads(line), suffixes))
