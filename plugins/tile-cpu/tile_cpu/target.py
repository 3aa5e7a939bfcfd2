"""`cpu` targets: the host, or a named CPU for cross-compilation, as LLVM sees it.

    cpu                         the host CPU (LLVM's name for it, the host triple)
    cpu:znver3                  a CPU by LLVM's name; the triple is the one whose LLVM backend knows it
    cpu:neoverse-v2             (aarch64-linux-gnu) ... any `-mcpu` value LLVM accepts
    cpu:x86-64-v3,+avx512f      explicit LLVM features after the CPU, comma-separated (+ on, - off)

Besides the LLVM target (mcpu, mtriple, mattr), `describe` reports what the GEMM
micro-kernel is chosen from: the vector width and the number of vector registers,
read from LLVM's feature set of that CPU (TVM's `llvm_get_vector_width` says 512 for
AVX2-only Zen 3, so the width is derived from the features instead), and the cache
sizes (the host's from sysfs; typical sizes for a named CPU). Everything imports TVM
lazily.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

# the triples tried, in order, to find the LLVM backend that knows a CPU name
_TRIPLES = ("x86_64-linux-gnu", "aarch64-linux-gnu", "riscv64-linux-gnu")
# the portable minimum when a host does not report its caches (bytes)
_DEFAULT_CACHES = {"l1": 32 * 1024, "l2": 512 * 1024, "l3": 8 * 1024 * 1024}


class CpuTargetError(ValueError):
    """A `cpu:...` target that names no CPU or feature LLVM knows."""


def parse(target: str) -> Tuple[Optional[str], List[str]]:
    """`cpu[:mcpu[,+feat,-feat...]]` -> (mcpu or None for the host, ["+feat", "-feat", ...])."""
    name, _, variant = target.partition(":")
    if name != "cpu":
        raise CpuTargetError(f"not a cpu target: {target!r}")
    if not variant or variant == "host":
        return None, []
    cpu, *features = [part.strip() for part in variant.split(",")]
    for feat in features:
        if len(feat) < 2 or feat[0] not in "+-":
            raise CpuTargetError(
                f"target {target!r}: feature {feat!r} must start with + or - (e.g. cpu:{cpu},+avx512f)"
            )
    return cpu or None, features


def _vector_shape(arch: str, has) -> Tuple[int, int]:
    """(vector bits, vector registers) of the widest float vector unit the features enable."""
    if arch == "x86_64":
        if has("avx512f"):
            return 512, 32
        if has("avx"):
            return 256, 16
        return 128, 16
    if arch == "aarch64":
        # SVE's length is a run-time property; NEON's 128 bits are the width every SVE part has
        return 128, 32
    return 128, 32 if arch.startswith("riscv") else 16


def _host_caches() -> Dict[str, int]:
    """L1 data, L2 and L3 sizes of the host (per core / per instance) from sysfs."""
    caches = dict(_DEFAULT_CACHES)
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(base)):
            folder = os.path.join(base, entry)
            if not entry.startswith("index"):
                continue
            with open(os.path.join(folder, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(folder, "level")) as f:
                level = int(f.read())
            with open(os.path.join(folder, "size")) as f:
                text = f.read().strip().upper()
            scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1:], 1)
            size = int(text.rstrip("KM")) * scale
            if kind in ("Data", "Unified") and level in (1, 2, 3):
                caches[f"l{level}"] = size
    except (OSError, ValueError):
        pass
    return caches


# What the lowering needs of a features set: names as LLVM spells them.
REPORTED_FEATURES = (
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512bf16",
    "avx512fp16",
    "avx512vnni",
    "avxvnni",
    "amx-tile",
    "amx-bf16",
    "amx-int8",
    "neon",
    "sve",
    "sve2",
    "bf16",
    "i8mm",
    "dotprod",
    "fullfp16",
)


def describe(target: str = "cpu") -> Dict[str, Any]:
    """The LLVM target of a `cpu` target and its ISA facts.

    Keys: cpu, triple, mattr, arch, vector_bits, vector_regs, features (those of
    REPORTED_FEATURES it has), caches {l1, l2, l3}, host (whether it is the host CPU
    itself), runs_here (same architecture and no feature the host lacks: its code can
    be linked and run here), llvm, tvm. The host target also enables the AMX features that
    /proc/cpuinfo reports and LLVM's model of the host CPU lacks (_missing_host_features).
    """
    import tvm
    from tvm.target import codegen

    cpu, features = parse(target)
    user_features = list(features)
    host_cpu = codegen.llvm_get_system_cpu()
    host_triple = codegen.llvm_get_system_triple()
    if cpu is None:
        cpu, triple = host_cpu, host_triple
        added = _missing_host_features(host_cpu, host_triple) & HOST_ADDED_FEATURES
        absent = _absent_host_features(host_cpu, host_triple)
        features = features + [f"+{f}" for f in sorted(added)] + [f"-{f}" for f in sorted(absent)]
    else:
        triple = next((t for t in _TRIPLES if codegen.llvm_is_valid_cpu(cpu, t)), None)
        if triple is None:
            raise CpuTargetError(
                f"target {target!r}: LLVM {codegen.llvm_version_major()} knows no CPU named "
                f"{cpu!r} (try e.g. cpu:znver3, cpu:sapphirerapids, cpu:neoverse-v2)"
            )
        if triple.split("-")[0] == host_triple.split("-")[0]:
            triple = host_triple  # the host's own spelling: the linker and loader expect it
    spec: Dict[str, Any] = {"kind": "llvm", "mcpu": cpu, "mtriple": triple}
    if features:
        spec["mattr"] = list(features)
    llvm_target = tvm.target.Target(spec)
    known = codegen.llvm_get_cpu_features(llvm_target)
    unknown = [f for f in features if f[1:] not in known and not _is_feature(f[1:], triple)]
    if unknown:
        raise CpuTargetError(f"target {target!r}: LLVM does not know the feature(s) {', '.join(unknown)}")

    def has(feat: str) -> bool:
        return bool(codegen.llvm_cpu_has_features([feat], llvm_target))

    arch = triple.split("-")[0]
    mattr = list(features)
    if arch == "x86_64" and has("avx512f") and not any(f.endswith("prefer-256-bit") for f in mattr):
        # LLVM tunes many AVX-512 CPUs to prefer 256-bit vectors (a guard against clock
        # throttling on old parts); tile loops are long and dense, so use the full width.
        mattr.append("-prefer-256-bit")
    for native in NATIVE_HALF_FEATURES.get(arch, ()):
        if has(native) and not any(f[1:] == native for f in user_features):
            # half arithmetic in half registers lets LLVM fuse a multiply and an add into one
            # rounding; tile-cpu computes float16 via float32, rounded per operation, bit for bit
            # the reference (measured: 25% of `(a * 0.3 + b) * c - a` one ulp off on an Emerald
            # Rapids host); a target that names the feature itself keeps it
            mattr.append(f"-{native}")
    bits, regs = _vector_shape(arch, has)
    is_host = cpu == host_cpu and triple == host_triple and not user_features
    reported = [f for f in REPORTED_FEATURES if has(f)]
    runs_here = is_host or (
        arch == host_triple.split("-")[0] and set(reported) <= _host_features(host_cpu, host_triple)
    )
    return {
        "cpu": cpu,
        "triple": triple,
        "mattr": mattr,
        "arch": arch,
        "vector_bits": bits,
        "vector_regs": regs,
        "features": reported,
        "caches": _host_caches() if is_host else dict(_DEFAULT_CACHES),
        "host": is_host,
        "runs_here": runs_here,
        "llvm": str(codegen.llvm_version_major()),
        "tvm": tvm.__version__,
    }


def _host_features(cpu: str, triple: str) -> set:
    """REPORTED_FEATURES of the host CPU (LLVM's model of it, plus what /proc/cpuinfo adds, less
    what it lacks)."""
    return (_model_features(cpu, triple) | _missing_host_features(cpu, triple)) - _absent_host_features(cpu, triple)


def _model_features(cpu: str, triple: str) -> set:
    """REPORTED_FEATURES that LLVM's model of the CPU named `cpu` has."""
    import tvm
    from tvm.target import codegen

    host = tvm.target.Target({"kind": "llvm", "mcpu": cpu, "mtriple": triple})
    return {f for f in REPORTED_FEATURES if codegen.llvm_cpu_has_features([f], host)}


# /proc/cpuinfo flag -> LLVM feature, for features a lowering chooses code by (tile_cpu.bf16dot)
CPUINFO_FEATURES = {
    "avx512_bf16": "avx512bf16",
    "avx512_fp16": "avx512fp16",
    "avx512_vnni": "avx512vnni",
    "avx_vnni": "avxvnni",
    "amx_tile": "amx-tile",
    "amx_bf16": "amx-bf16",
    "amx_int8": "amx-int8",
}


# features that compute float16 arithmetic in half registers, per architecture (turned off: `describe`)
NATIVE_HALF_FEATURES = {"x86_64": ("avx512fp16",), "aarch64": ("fullfp16",)}

# Of those, the ones the host target enables when LLVM's model lacks them: features that only
# instructions tile-cpu chooses use (AMX: tile_cpu.dot_gemm). Others change how LLVM lowers plain
# code (+avx512fp16 computes float16 arithmetic in float16, not via float32 as tile-cpu expects).
HOST_ADDED_FEATURES = {"amx-tile", "amx-bf16", "amx-int8"}


def _missing_host_features(cpu: str, triple: str) -> set:
    """Features the host has (its /proc/cpuinfo flags) that LLVM's model of the CPU it names lacks.

    LLVM names the host from its model number; a virtual machine may report the number of an
    older part than the silicon (seen: a Xeon with AVX-512 BF16 and AMX reported as model 167,
    which LLVM calls rocketlake). They count for `runs_here`; the host target enables those of
    HOST_ADDED_FEATURES."""
    flags = _cpuinfo_flags(triple)
    if flags is None:
        return set()
    present = {CPUINFO_FEATURES[flag] for flag in flags if flag in CPUINFO_FEATURES}
    return present - _model_has(cpu, triple, present)


def _absent_host_features(cpu: str, triple: str) -> set:
    """Features of CPUINFO_FEATURES that LLVM's model of the CPU it names has but the host's
    /proc/cpuinfo does not: the host target turns them off. A virtual machine may also hide what
    the silicon has (seen: an Emerald Rapids guest without AMX, which the kernel must enable;
    AMX code would only be refused at run time)."""
    flags = _cpuinfo_flags(triple)
    if flags is None:
        return set()
    lacking = {feature for flag, feature in CPUINFO_FEATURES.items() if flag not in flags}
    return _model_has(cpu, triple, lacking)


def _cpuinfo_flags(triple: str) -> Optional[List[str]]:
    """The host's /proc/cpuinfo flags on x86_64, else None (nothing to compare with)."""
    if not triple.startswith("x86_64"):
        return None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), None)
    except OSError:
        return None


def _model_has(cpu: str, triple: str, features) -> set:
    """Those of `features` that LLVM's model of the CPU named `cpu` has."""
    import tvm
    from tvm.target import codegen

    model = tvm.target.Target({"kind": "llvm", "mcpu": cpu, "mtriple": triple})
    return {f for f in features if codegen.llvm_cpu_has_features([f], model)}


def _is_feature(name: str, triple: str) -> bool:
    """Whether `name` is a feature LLVM knows for `triple` (some CPU has it or it can be enabled)."""
    import tvm
    from tvm.target import codegen

    probe = tvm.target.Target({"kind": "llvm", "mtriple": triple, "mattr": [f"+{name}"]})
    return bool(codegen.llvm_cpu_has_features([name], probe))


def llvm_target(info: Dict[str, Any]) -> Dict[str, Any]:
    """The TVM target dict of a `describe` result."""
    spec = {"kind": "llvm", "mcpu": info["cpu"], "mtriple": info["triple"]}
    if info.get("mattr"):
        spec["mattr"] = list(info["mattr"])
    return spec
