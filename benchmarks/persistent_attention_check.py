"""test_persistent.py's GPU attention cases without TVM on the GPU host: each case compiled here
twice (persistent, and persistent=False: one block per tile), pickled; on the GPU both run on the
same random inputs and must give the same bits, and attention's result (torch SDPA in float32).

    python benchmarks/persistent_attention_check.py build DIR     # here (TVM, nvcc)
    python benchmarks/persistent_attention_check.py run DIR       # on the GPU (torch, the plugin's launcher)
"""

from __future__ import annotations

import glob
import json
import os
import pickle
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "plugins", "tile-cuda", "tests"))


def build(out_dir: str) -> None:
    """Pickle (case, persistent artifact, one-block-per-tile artifact) per ATTN_GPU_CASES entry."""
    from test_persistent import ATTN_GPU_CASES, _attention

    import tilecore

    os.makedirs(out_dir, exist_ok=True)
    for n, case in enumerate(ATTN_GPU_CASES):
        causal, batch, heads, seq, options = case
        func = _attention(causal, batch=batch, heads=heads, seq=seq)
        arts = [
            tilecore.compile(func, target="cuda:sm_90a", **opts).artifact
            for opts in (options, dict(options, persistent=False))
        ]
        with open(os.path.join(out_dir, f"case{n}.pkl"), "wb") as f:
            pickle.dump((case, *arts), f)
        print(n, case, arts[0].meta["grid_py"], arts[1].meta["grid_py"], flush=True)


def run(out_dir: str) -> None:
    """One JSON line per case: same bits, max |error| against torch's float32 SDPA."""
    from test_persistent import ATTN_TOLERANCE, run_attention_pair

    for path in sorted(glob.glob(os.path.join(out_dir, "case*.pkl"))):
        with open(path, "rb") as f:
            case, art, base = pickle.load(f)
        same, err = run_attention_pair(case, art, base)
        ok = same and err < ATTN_TOLERANCE
        print(
            json.dumps(dict(case=str(case), grid=art.meta["grid_py"], same_bits=same, max_err=err, ok=ok)), flush=True
        )


if __name__ == "__main__":
    mode, directory = sys.argv[1:3]
    (build if mode == "build" else run)(directory)
