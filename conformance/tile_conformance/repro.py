"""Running a failure's minimal program by hand.

Every failure in a report carries `repro.script`: the failing program's DSL
source followed by a call to `run_repro`, so saving it as `repro.py` and
running `python repro.py` rebuilds the same inputs from the same seed, runs the
backend and the reference interpreter, and prints the comparison.
"""

from __future__ import annotations

import json

from .programs import Param, Program, Tolerance


def program_from_record(record: dict) -> Program:
    """Rebuild a Program from the `program` record a report or bundle stores."""
    params = [
        Param(p["name"], tuple(p["shape"]), p["dtype"], p["role"], p["lo"], p["hi"], p.get("edges", ""))
        for p in record["params"]
    ]
    tols = {k: Tolerance.from_json(v) for k, v in record["tolerances"].items()}
    return Program(
        record["family"],
        record.get("knobs", {}),
        record["source"],
        params,
        dict(record.get("bindings", {})),
        frozenset(record.get("features", ())),
        tols,
        int(record["input_seed"]),
    )


def program_record(program: Program) -> dict:
    """The JSON form of a Program (everything needed to run it again)."""
    return {
        "family": program.family,
        "knobs": program.knobs,
        "source": program.source,
        "params": [
            {
                "name": p.name,
                "shape": list(p.shape),
                "dtype": p.dtype,
                "role": p.role,
                "lo": p.lo,
                "hi": p.hi,
                **({"edges": p.edges} if p.edges else {}),
            }
            for p in program.params
        ],
        "bindings": program.bindings,
        "features": sorted(program.features),
        "tolerances": {k: v.to_json() for k, v in program.tolerances.items()},
        "input_seed": program.input_seed,
    }


def repro_script(program: Program, backend: str) -> str:
    """The failing program as runnable DSL source plus the call that checks it."""
    record = program_record(program)
    record.pop("source")
    record.pop("knobs")
    return (
        program.source
        + '\n\nif __name__ == "__main__":\n'
        + "    # rebuilds the suite's inputs from the seed and compares with the reference interpreter\n"
        + "    from tile_conformance.repro import run_repro\n\n"
        + f"    ok = run_repro(main, {backend!r}, {json.dumps(record, sort_keys=True)!r})\n"
        + "    raise SystemExit(0 if ok else 1)\n"
    )


def run_repro(func, backend: str, record_json: str) -> bool:
    """Run `func` on `backend` and on the reference with the recorded inputs; print the verdict."""
    import tilecore

    from .execute import call_on_device, compare_outputs, make_inputs, program_features, reference_outputs

    record = json.loads(record_json)
    record["source"] = func.source
    program = program_from_record(record)
    arrays = make_inputs(program.params, program.bindings, program.input_seed)
    ref = reference_outputs(func, program, arrays)
    try:
        kernel = tilecore.compile(func, target=backend)
    except Exception as err:
        print(f"{backend}: compile failed: {type(err).__name__}: {err}")
        return False
    try:
        got = call_on_device(kernel, arrays, kernel.backend.capabilities.memory_space)
    except Exception as err:
        print(f"{backend}: run failed: {type(err).__name__}: {err}")
        return False
    outcome = compare_outputs(program, ref, got, program_features(func, program))
    if outcome.status == "pass":
        print(f"{backend}: matches the reference interpreter")
        return True
    print(f"{backend}: {outcome.message}")
    return False
