"""tilecore.compat.tilelang: TileLang's host names on tilecore."""

from __future__ import annotations

import time

import numpy as np
import pytest

import tilecore
import tilecore.compat.tilelang as tilelang
import tilecore.compat.tilelang.language as T
from tilecore.diagnostics import UnsupportedFeatureError
from tilecore.plugin import hookimpl


def test_language_is_tilecore_language_itself():
    import tilecore.language

    assert T is tilecore.language
    assert tilelang.language is tilecore.language
    assert tilelang.layout.make_swizzled_layout is tilecore.language.make_swizzled_layout


@pytest.mark.parametrize("a, b", [(1, 1), (7, 2), (8, 2), (1000, 128), (0, 5)])
def test_cdiv_rounds_up(a, b):
    assert tilelang.cdiv(a, b) == -(-a // b)


def test_jit_with_pass_configs_and_device_target_compiles_and_runs(monkeypatch):
    monkeypatch.setenv("TILECORE_TARGET", "reference")

    @tilelang.jit(
        out_idx=[-1],
        target="cuda",
        pass_configs={
            tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True,
            tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True,
            "tl.disable_warp_specialized": True,
        },
    )
    def double(n, block=4):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(tilelang.cdiv(n, block)) as bx:
                t = T.alloc_fragment((block,), "float32")
                T.copy(A[bx * block], t)
                for i in T.Parallel(block):
                    t[i] = t[i] * 2
                T.copy(t, B[bx * block])

        return main

    kernel = double(10)
    assert kernel.target == "reference"  # TILECORE_TARGET wins over TileLang's device name
    np.testing.assert_array_equal(kernel(np.arange(10, dtype=np.float32)), np.arange(10) * 2)


def test_compile_maps_targets_and_names_an_unknown_pass_config():
    @T.prim_func
    def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            T.copy(A, B)

    kernel = tilelang.compile(main, out_idx=-1, target="reference")
    np.testing.assert_array_equal(kernel(np.ones(4, np.float32)), np.ones(4))
    with pytest.raises(UnsupportedFeatureError, match="'tl.made_up_switch'"):
        tilelang.compile(main, out_idx=-1, target="reference", pass_configs={"tl.made_up_switch": 1})


@pytest.mark.parametrize(
    "given, expected, package",
    [
        ("auto", None, None),
        ("reference", "reference", None),
        ("cuda", "cuda", "tile_cuda"),
        ("hip", "rocm", "tile_rocm"),
        ("hip:gfx942", "rocm:gfx942", "tile_rocm"),
        ("llvm", "cpu", "tile_cpu"),
        ("c", "cpu", "tile_cpu"),
        ("cpu", "cpu", "tile_cpu"),
        ("cuda:sm_90a", "cuda:sm_90a", None),
        ({"kind": "metal"}, "metal", "tile_metal"),
    ],
)
def test_map_target(monkeypatch, given, expected, package):
    """Device names other than a backend's own ("hip", "llvm") come from the plugins' declarations."""
    if package:
        pytest.importorskip(package)  # the declaring plugin's package, not the registry under test
    monkeypatch.delenv("TILECORE_TARGET", raising=False)
    assert tilelang.map_target(given) == expected


# ---------------------------------------------------------------- vendor names come from the plugins


def test_hip_target_compiles_for_the_rocm_backend(monkeypatch):
    pytest.importorskip("tile_rocm")
    from tilecore.plugin import get_registry

    backend = get_registry().get("rocm")
    if not backend.toolchain_status().ok:
        pytest.skip(f"tile-rocm cannot compile here: {backend.toolchain_status().summary}")
    monkeypatch.delenv("TILECORE_TARGET", raising=False)
    kernel = tilelang.compile(_copy4(), out_idx=-1, target="hip:gfx90a")
    assert kernel.target == "rocm:gfx90a" and kernel.source


@pytest.fixture
def only_plugins(monkeypatch):
    """Load only the named entry points (as if only those distributions were installed)."""
    from tilecore.plugin import reset_plugins

    def load(names):
        monkeypatch.delenv("TILECORE_DISABLE_PLUGIN_AUTOLOAD", raising=False)
        monkeypatch.setenv("TILECORE_PLUGINS", names)
        reset_plugins()

    yield load
    reset_plugins()  # rediscovered with the environment monkeypatch restores


def test_vendor_pass_configs_are_the_cuda_plugins(monkeypatch):
    pytest.importorskip("tile_cuda")
    from tile_cuda.tilelang_names import PASS_CONFIGS

    assert "TL_DISABLE_WGMMA" not in tilelang.host.NEUTRAL_PASS_CONFIGS
    for member, key in PASS_CONFIGS.items():
        assert tilelang.PassConfigKey[member].value == key == getattr(tilelang.PassConfigKey, member)
    monkeypatch.setenv("TILECORE_TARGET", "reference")
    kernel = tilelang.compile(
        _copy4(),
        out_idx=-1,
        target="cuda",
        pass_configs={tilelang.PassConfigKey.TL_DISABLE_WGMMA: True, "tl.ptxas_register_usage_level": 10},
    )
    np.testing.assert_array_equal(kernel(np.ones(4, np.float32)), np.ones(4))


def test_without_the_declaring_plugins_vendor_names_are_clear_errors(monkeypatch, only_plugins):
    from tilecore.plugin.registry import TargetError

    only_plugins("npu")
    monkeypatch.delenv("TILECORE_TARGET", raising=False)
    assert not hasattr(tilelang.PassConfigKey, "TL_DISABLE_WGMMA")
    assert tilelang.PassConfigKey.TL_ENABLE_FAST_MATH.value == "tl.enable_fast_math"  # target-neutral
    with pytest.raises(UnsupportedFeatureError, match="'tl.disable_wgmma'.*installed backend declares"):
        tilelang.compile(_copy4(), out_idx=-1, target="reference", pass_configs={"tl.disable_wgmma": True})
    assert tilelang.map_target("hip") == "hip"  # no longer an alias: the registry names it
    with pytest.raises(TargetError, match="unknown target 'hip'.*no installed backend"):
        tilelang.compile(_copy4(), out_idx=-1, target="hip")


class ToyAccelPlugin:
    """A third-party backend that declares its own TileLang spellings, registered at run time."""

    @hookimpl
    def tilecore_register_backends(self, register):
        from tilecore.ir.version import TILE_IR_VERSION
        from tilecore.plugin import Backend, Capabilities, TileLangNames, ToolchainStatus

        register(
            Backend(
                name="toyaccel",
                targets=("toyaccel", "toyaccel:v2"),
                ir_versions=(TILE_IR_VERSION,),
                capabilities=Capabilities(features=frozenset(), dtypes=frozenset({"float32"})),
                toolchain_status=lambda: ToolchainStatus(ok=True, summary="toy"),
                distribution="tile-toyaccel",
                tilelang=TileLangNames(
                    targets=("toy_device",),
                    pass_configs={"TL_TOY_FAST_DMA": "toy.fast_dma"},
                    primitives=("toy_dma_*", "toy_sync"),
                    primitive_note="write the copy with T.copy",
                ),
            )
        )


@pytest.fixture
def toy_accel():
    from tilecore.plugin import register_plugin, unregister_plugin

    name = register_plugin(ToyAccelPlugin(), "toyaccel")
    yield
    unregister_plugin(name)


def test_a_third_party_plugin_declares_its_own_tilelang_names(monkeypatch, toy_accel):
    monkeypatch.delenv("TILECORE_TARGET", raising=False)
    assert tilelang.map_target("toy_device") == "toyaccel"
    assert tilelang.map_target("toy_device:v2") == "toyaccel:v2"
    assert tilelang.PassConfigKey.TL_TOY_FAST_DMA.value == "toy.fast_dma"
    monkeypatch.setenv("TILECORE_TARGET", "reference")
    kernel = tilelang.compile(
        _copy4(), out_idx=-1, target="toy_device", pass_configs={tilelang.PassConfigKey.TL_TOY_FAST_DMA: 1}
    )
    np.testing.assert_array_equal(kernel(np.ones(4, np.float32)), np.ones(4))
    with pytest.raises(UnsupportedFeatureError) as info:
        T.toy_dma_start
    assert "specific to the hardware of backend 'toyaccel' (tile-toyaccel)" in str(info.value)
    assert "write the copy with T.copy" in str(info.value)
    from tilecore.cli.backends import describe_backends

    listed = {b["name"]: b["tilelang"] for b in describe_backends()["backends"]}  # `tile backends --json`
    assert listed["toyaccel"] == {
        "targets": ["toy_device"],
        "pass_configs": ["toy.fast_dma"],
        "primitives": ["toy_dma_*", "toy_sync"],
    }


class CudaLikePlugin:
    """A third party's GPU backend that answers to TileLang's target "cuda" (no tile-cuda loaded)."""

    @hookimpl
    def tilecore_register_backends(self, register):
        from tilecore.ir.version import TILE_IR_VERSION
        from tilecore.plugin import Backend, Capabilities, TileLangNames, ToolchainStatus

        register(
            Backend(
                name="cudalike",
                targets=("cudalike",),
                ir_versions=(TILE_IR_VERSION,),
                capabilities=Capabilities(features=frozenset(), dtypes=frozenset({"float32"})),
                toolchain_status=lambda: ToolchainStatus(ok=True, summary="toy"),
                device_present=lambda: True,
                tilelang=TileLangNames(targets=("cuda",), device_version=lambda: (9, 0)),
            )
        )


def test_requires_cuda_compute_version_reads_the_declared_device_version(only_plugins):
    pytest.importorskip("torch")  # TileLang's requires_* also need torch, which its tests use
    from tilecore.plugin import register_plugin, unregister_plugin

    only_plugins("npu")
    name = register_plugin(CudaLikePlugin(), "cudalike")
    try:
        ran = []
        tilelang.testing.requires_cuda(lambda: ran.append("any"))()
        tilelang.testing.requires_cuda_compute_version_ge(9, 0)(lambda: ran.append("ge 9.0"))()
        tilelang.testing.requires_cuda_compute_version_eq(9)(lambda: ran.append("eq 9.0"))()
        with pytest.raises(pytest.skip.Exception, match="compute capability ge 10.0"):
            tilelang.testing.requires_cuda_compute_version_ge(10, 0)(lambda: ran.append("ge 10.0"))()
        assert ran == ["any", "ge 9.0", "eq 9.0"]
    finally:
        unregister_plugin(name)


def test_a_third_party_declaration_goes_away_with_its_plugin(monkeypatch):
    from tilecore.plugin import register_plugin, unregister_plugin

    monkeypatch.delenv("TILECORE_TARGET", raising=False)
    unregister_plugin(register_plugin(ToyAccelPlugin(), "toyaccel"))
    assert tilelang.map_target("toy_device") == "toy_device"
    assert not hasattr(tilelang.PassConfigKey, "TL_TOY_FAST_DMA")
    with pytest.raises(AttributeError, match="no attribute 'toy_sync'"):
        T.toy_sync


@pytest.mark.parametrize(
    "tilelang_names, problem",
    [
        (dict(targets="hip"), "tuples / a dict of non-empty strings"),
        (dict(primitives=("",)), "tuples / a dict of non-empty strings"),
        (dict(pass_configs={"not an identifier": "x.y"}), "must be identifiers"),
    ],
)
def test_a_malformed_tilelang_declaration_is_a_registration_error(tilelang_names, problem):
    from tilecore.ir.version import TILE_IR_VERSION
    from tilecore.plugin import (
        Backend,
        Capabilities,
        TileLangNames,
        ToolchainStatus,
        get_registry,
        register_plugin,
        unregister_plugin,
    )

    class Malformed:
        @hookimpl
        def tilecore_register_backends(self, register):
            register(
                Backend(
                    name="malformed",
                    targets=("malformed",),
                    ir_versions=(TILE_IR_VERSION,),
                    capabilities=Capabilities(features=frozenset(), dtypes=frozenset()),
                    toolchain_status=lambda: ToolchainStatus(ok=True, summary=""),
                    tilelang=TileLangNames(**tilelang_names),
                )
            )

    name = register_plugin(Malformed(), "malformed")
    try:
        registry = get_registry()
        assert "malformed" not in registry.names()
        assert any(problem in e.error for e in registry.errors if e.name == "malformed")
    finally:
        unregister_plugin(name)


def _copy4():
    @T.prim_func
    def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            T.copy(A, B)

    return main


def test_eager_style_through_the_compat_jit(monkeypatch):
    monkeypatch.setenv("TILECORE_TARGET", "reference")

    @tilelang.jit
    def add_one(A, block: int):
        N = T.const("N")
        A: T.Tensor((N,), T.float32)
        B = T.empty((N,), T.float32)
        with T.Kernel(T.ceildiv(N, block), threads=32) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    B[bx * block + i] = A[bx * block + i] + 1
        return B

    np.testing.assert_array_equal(add_one(np.zeros(5, np.float32), 4), np.ones(5))
    np.testing.assert_array_equal(add_one.compile(N=3, block=2)(np.ones(3, np.float32)), [2, 2, 2])


def test_missing_components_raise_unsupported_feature_errors_naming_them(monkeypatch):
    import importlib.util

    if importlib.util.find_spec("tilecore.autotune") is None:

        @tilelang.autotune(configs=[{"block": 4}])  # a file defining a tuned kernel still imports
        def tuned(block=4):
            return block

        with pytest.raises(UnsupportedFeatureError, match="autotune"):
            tuned()
    if importlib.util.find_spec("tilecore.profiler") is None:
        from tilecore.compat.tilelang.profiler import do_bench

        with pytest.raises(UnsupportedFeatureError, match="profiler"):
            do_bench(lambda: None)
    with pytest.raises(UnsupportedFeatureError, match="process_func"):
        tilelang.testing.process_func(lambda: 0)
    with pytest.raises(AttributeError, match="tilecore does not provide this part of TileLang"):
        tilelang.carver


def test_testing_helpers():
    tilelang.testing.set_random_seed(3)
    first = np.random.rand()
    tilelang.testing.set_random_seed(3)
    assert np.random.rand() == first
    a = np.zeros(1000)
    b = a.copy()
    b[0] = 1.0
    tilelang.testing.torch_assert_close(a, b, max_mismatched_ratio=0.001)  # one mismatch allowed
    b[1] = 1.0
    with pytest.raises(AssertionError, match="2 of 1000 elements differ"):
        tilelang.testing.torch_assert_close(a, b, max_mismatched_ratio=0.001)
    assert tilelang.math.next_power_of_2(33) == 64 and tilelang.math.next_power_of_2(1) == 1


def test_requires_cuda_skips_without_a_cuda_device():
    ran = []

    @tilelang.testing.requires_cuda
    def needs_gpu():
        ran.append(1)

    if tilelang.testing._device_backend("cuda") is None:
        with pytest.raises(pytest.skip.Exception):
            needs_gpu()
        assert not ran


@pytest.mark.parametrize(
    "kind, dtype",
    [
        ("Auto", "float16"),
        ("Integer", "int32"),
        ("Randn", "float32"),
        ("Zero", "int8"),
        ("One", "bfloat16"),
        ("Auto", "uint8"),
    ],
)
def test_get_tensor_supply_makes_tensors_of_the_parameter_type(kind, dtype):
    pytest.importorskip("torch")
    from tilecore.compat.tilelang.utils.tensor import get_tensor_supply, map_torch_type
    from tilecore.ir import nodes as N

    param = N.Buffer("A", (3, 5), dtype, "global")
    t = get_tensor_supply(tilelang.TensorSupplyType[kind])(param)
    assert tuple(t.shape) == (3, 5) and t.dtype == map_torch_type(dtype)
    values = t.float().numpy()
    if kind == "Zero":
        assert (values == 0).all()
    elif kind == "One":
        assert (values == 1).all()
    elif dtype == "uint8":
        assert values.min() >= 0 and values.max() < 3
    else:
        assert np.abs(values).max() <= 10


def test_autotune_with_every_tuned_parameter_given_runs_that_configuration(monkeypatch):
    pytest.importorskip("tilecore.autotune")
    monkeypatch.setenv("TILECORE_TARGET", "reference")
    calls = []

    @tilelang.autotune(configs=[{"block": 2}, {"block": 4}], warmup=1, rep=2, workers=1)
    @tilelang.jit(out_idx=[-1])
    def twice(n, block=4):
        calls.append(block)

        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(tilelang.cdiv(n, block)) as bx:
                t = T.alloc_fragment((block,), "float32")
                T.copy(A[bx * block], t)
                for i in T.Parallel(block):
                    t[i] = t[i] * 2
                T.copy(t, B[bx * block])

        return main

    kernel = twice(8, block=2)
    assert calls == [2]  # no tuning: the given configuration only
    np.testing.assert_array_equal(kernel(np.arange(8, dtype=np.float32)), np.arange(8) * 2)


def test_do_bench_times_a_callable_through_tilecore_profiler():
    pytest.importorskip("tilecore.profiler")
    from tilecore.compat.tilelang.profiler import do_bench

    calls = []
    ms = do_bench(lambda: calls.append(time.sleep(0.002)), warmup=4, rep=10)
    assert 1.5 <= ms < 200 and len(calls) >= 3
    low, high = do_bench(lambda: None, quantiles=[0.2, 0.8], _n_warmup=1, _n_repeat=5)
    assert 0 <= low <= high


def test_autotune_with_some_tuned_parameters_given_tunes_the_others(monkeypatch):
    pytest.importorskip("tilecore.autotune")
    monkeypatch.setenv("TILECORE_TARGET", "reference")

    @tilelang.autotune(configs=[{"block": b, "copies": c} for b in (2, 4) for c in (1, 2)], warmup=1, rep=2, workers=1)
    @tilelang.jit(out_idx=[-1])
    def scaled(n, block=4, copies=1):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(tilelang.cdiv(n, block)) as bx:
                t = T.alloc_fragment((block,), "float32")
                T.copy(A[bx * block], t)
                for i in T.Parallel(block):
                    t[i] = t[i] * (copies + 1)
                T.copy(t, B[bx * block])

        return main

    kernel = scaled(8, block=2)
    tried = [c.config for c in scaled.last_report.candidates]
    assert tried and all("block" not in c and c["copies"] in (1, 2) for c in tried)  # only copies tuned
    x = np.arange(8, dtype=np.float32)
    assert any(np.array_equal(kernel(x), x * k) for k in (2, 3))


def test_autotuned_eager_kernel_compiles_a_given_configuration(monkeypatch):
    pytest.importorskip("tilecore.autotune")
    monkeypatch.setenv("TILECORE_TARGET", "reference")

    @tilelang.autotune(configs=[{"block": 2}, {"block": 4}], warmup=1, rep=2, workers=1)
    @tilelang.jit
    def triple(A, block: int):
        N = T.const("N")
        A: T.Tensor((N,), T.float32)
        B = T.empty((N,), T.float32)
        with T.Kernel(T.ceildiv(N, block)) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    B[bx * block + i] = A[bx * block + i] * 3
        return B

    kernel = triple.compile(N=7, block=4)
    x = np.random.default_rng(0).random(7).astype(np.float32)
    np.testing.assert_allclose(kernel(x), x * 3, rtol=1e-6)
    tuned = triple.compile(N=7)  # block left out: tuned over the configs
    np.testing.assert_allclose(tuned(x), x * 3, rtol=1e-6)
    assert triple.last_report.best_config["block"] in (2, 4)
    np.testing.assert_allclose(triple(x), x * 3, rtol=1e-6)  # called with its array: tuned too


def test_autotuned_eager_call_tunes_the_parameters_it_leaves_out(monkeypatch):
    pytest.importorskip("tilecore.autotune")
    monkeypatch.setenv("TILECORE_TARGET", "reference")

    @tilelang.autotune(
        configs=[{"rows": r, "threads": t} for r in (2, 4) for t in (32, 64)], warmup=1, rep=2, workers=1
    )
    @tilelang.jit
    def row_max(X, rows, threads=32):
        M, N = T.const("M, N")
        X: T.Tensor((M, N), T.float32)
        Y = T.empty((M,), T.float32)
        with T.Kernel(T.ceildiv(M, rows), threads=threads) as bx:
            tile = T.alloc_fragment((rows, N), T.float32)
            best = T.alloc_fragment((rows,), T.float32)
            T.copy(X[bx * rows, 0], tile)
            T.reduce_max(tile, best, dim=1)
            for i in T.Parallel(rows):
                if bx * rows + i < M:
                    Y[bx * rows + i] = best[i]
        return Y

    x = np.random.default_rng(1).standard_normal((6, 5)).astype(np.float32)
    np.testing.assert_array_equal(row_max(x, rows=4), x.max(axis=1))  # threads tuned, rows given
    assert row_max.last_report.best_config.keys() == {"threads"}


def test_profiler_of_a_tilelang_kernel_hands_torch_tensors_to_the_reference(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("TILECORE_TARGET", "reference")

    @tilelang.jit(out_idx=[-1])
    def negate(n):
        @T.prim_func
        def main(A: T.Tensor((n, 4), "float32"), B: T.Tensor((n, 4), "float32")):
            with T.Kernel(1) as bx:
                for i, j in T.Parallel(n, 4):
                    B[i, j] = -A[i, j]

        return main

    seen = []

    def reference(a):
        seen.append(type(a))
        assert a.size(-1) == 4  # torch's size(): what TileLang reference programs call
        return -a

    negate(3).get_profiler().assert_allclose(reference)
    assert seen == [torch.Tensor]
    native = tilecore.compile(negate.prim_func(3), target="reference", out_idx=[-1])
    assert isinstance(native.get_profiler().inputs[0], np.ndarray)
