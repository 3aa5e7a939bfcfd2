"""The on-disk compile cache: format checks, corruption/truncation recovery, concurrent
compiles in two real processes, the memo, and TILECORE_CACHE=0."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap

import pytest

from tilecore.envflags import EnvSettingError
from tilecore.plugin.backend import Artifact
from tilecore.runtime import cache as C

sys.path.insert(0, os.path.dirname(__file__))
from test_plugin_support import clean_env, install_toy_and_broken, run_python  # noqa: E402


def _artifact():
    return Artifact(
        backend="toy",
        target="toy:fast",
        entry="main",
        source="// code\n",
        blobs={"lib.so": bytes(range(256)) * 3, "empty": b""},
        meta={"grid": [1, 2]},
    )


def test_round_trip(tmp_path):
    cache = C.DiskCache(str(tmp_path))
    key = "ab" + "0" * 62
    path = cache.put(key, _artifact())
    assert path == str(tmp_path / "ab" / (key + ".tcc"))
    assert cache.get(key) == _artifact()
    assert cache.get("cd" + "0" * 62) is None
    assert not glob.glob(str(tmp_path / "ab" / "*.tmp"))


@pytest.mark.parametrize(
    "damage", ["truncate_payload", "truncate_header", "flip_payload", "flip_header", "empty", "garbage"]
)
def test_corrupt_entries_are_detected_and_removed(tmp_path, damage, caplog):
    cache = C.DiskCache(str(tmp_path))
    key = "ef" + "1" * 62
    path = cache.put(key, _artifact())
    data = open(path, "rb").read()
    header_end = data.index(b"\n", len(C.MAGIC))
    if damage == "truncate_payload":
        data = data[:-10]
    elif damage == "truncate_header":
        data = data[: header_end - 5]
    elif damage == "flip_payload":
        i = header_end + 40
        data = data[:i] + bytes([data[i] ^ 0x20]) + data[i + 1 :]
    elif damage == "flip_header":
        i = data.index(b'"size": ') + 8  # a different but well-formed number
        data = data[:i] + (b"9" if data[i : i + 1] != b"9" else b"8") + data[i + 1 :]
    elif damage == "empty":
        data = b""
    else:
        data = os.urandom(500)
    open(path, "wb").write(data)
    with caplog.at_level("WARNING", logger="tilecore.cache"):
        assert cache.get(key) is None
    assert "ignoring corrupt entry" in caplog.text
    assert not os.path.exists(path)  # removed, so the next compile rewrites it


def test_entry_under_wrong_key_is_rejected(tmp_path):
    cache = C.DiskCache(str(tmp_path))
    k1, k2 = "aa" + "2" * 62, "aa" + "3" * 62
    os.makedirs(tmp_path / "aa")
    open(cache.path(k2), "wb").write(C.encode_entry(k1, _artifact()))
    assert cache.get(k2) is None


def test_key_depends_on_every_input():
    base = ("{}", "cpu", "0.1", "cpu", {"a": 1, "b": [1, 2]})
    k = C.cache_key(*base)
    assert k == C.cache_key("{}", "cpu", "0.1", "cpu", {"b": [1, 2], "a": 1})  # order-free
    variants = [
        ("{ }", "cpu", "0.1", "cpu", base[4]),
        ("{}", "cuda", "0.1", "cpu", base[4]),
        ("{}", "cpu", "0.2", "cpu", base[4]),
        ("{}", "cpu", "0.1", "cpu:x", base[4]),
        ("{}", "cpu", "0.1", "cpu", {"a": 2, "b": [1, 2]}),
    ]
    assert len({k} | {C.cache_key(*v) for v in variants}) == 6


def test_unwritable_cache_dir_only_warns(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    cache = C.DiskCache(str(blocker / "sub"))
    with caplog.at_level("WARNING", logger="tilecore.cache"):
        assert cache.put("ab" + "4" * 62, _artifact()) is None
    assert "cannot write" in caplog.text


# ---------------------------------------------------------------------- through compile()

COMPILE_AND_RUN = """
import numpy as np, tilecore
from test_plugin_support import simple_add_func
k = tilecore.compile(simple_add_func(32), target="toy", out_idx=[-1])
a = np.arange(32, dtype=np.float32)
np.testing.assert_array_equal(k(a, a), 2 * a)
k2 = tilecore.compile(simple_add_func(32), target="toy", out_idx=[-1])  # memo: no new codegen
assert k2.artifact is k.artifact
print("ok")
"""


def _compiles(counter):
    return len(open(counter).read().splitlines()) if os.path.exists(counter) else 0


@pytest.fixture
def toy_env(tmp_path):
    site = install_toy_and_broken(tmp_path / "site")
    return clean_env(tmp_path, site, TOY_COUNTER=tmp_path / "compiles.txt")


def _entries(env):
    return glob.glob(os.path.join(env["TILECORE_CACHE_DIR"], "*", "*.tcc"))


def test_second_process_hits_the_disk_cache(toy_env):
    counter = toy_env["TOY_COUNTER"]
    assert run_python(COMPILE_AND_RUN, toy_env).stdout.strip() == "ok"
    assert _compiles(counter) == 1
    assert run_python(COMPILE_AND_RUN, toy_env).stdout.strip() == "ok"
    assert _compiles(counter) == 1
    assert len(_entries(toy_env)) == 1


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_corrupted_entry_is_rebuilt(toy_env, damage):
    counter = toy_env["TOY_COUNTER"]
    run_python(COMPILE_AND_RUN, toy_env)
    (path,) = _entries(toy_env)
    data = open(path, "rb").read()
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data = data[:-3] + bytes([data[-3] ^ 1]) + data[-2:]
    open(path, "wb").write(data)
    proc = run_python(COMPILE_AND_RUN, toy_env)
    assert proc.stdout.strip() == "ok" and "ignoring corrupt entry" in proc.stderr
    assert _compiles(counter) == 2
    (path2,) = _entries(toy_env)
    secret = C.DiskCache(toy_env["TILECORE_CACHE_DIR"]).secret()
    assert C.decode_entry(open(path2, "rb").read(), secret=secret).backend == "toy"  # rewritten, valid
    run_python(COMPILE_AND_RUN, toy_env)
    assert _compiles(counter) == 2


def test_cache_disabled(toy_env):
    env = dict(toy_env, TILECORE_CACHE="0")
    code = COMPILE_AND_RUN.replace("assert k2.artifact is k.artifact", "assert k2.artifact is not k.artifact")
    run_python(code, env)
    run_python(code, env)
    assert _compiles(env["TOY_COUNTER"]) == 4
    assert _entries(env) == []


def test_two_processes_compile_the_same_kernel_at_once(toy_env):
    env = dict(toy_env, TOY_BARRIER="2")  # both are inside codegen at the same time
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(COMPILE_AND_RUN)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err
        assert out.strip() == "ok"
    assert _compiles(env["TOY_COUNTER"]) == 2  # both missed and compiled, neither failed
    (path,) = _entries(env)
    secret = C.DiskCache(env["TILECORE_CACHE_DIR"]).secret()
    assert C.decode_entry(open(path, "rb").read(), secret=secret).blobs["program.bin"] == b"\x00\x01toy" * 100
    assert not glob.glob(os.path.join(env["TILECORE_CACHE_DIR"], "*", "*.tmp"))
    run_python(COMPILE_AND_RUN, toy_env)
    assert _compiles(env["TOY_COUNTER"]) == 2


def test_size_limit_evicts_least_recently_used_entries(tmp_path, monkeypatch):
    """The cache used to grow without bound (300 MB on the development machine)."""
    cache = C.DiskCache(str(tmp_path))
    keys = [f"{i:02x}" + "7" * 62 for i in range(10)]
    size = len(C.encode_entry(keys[0], _artifact()))
    monkeypatch.setenv("TILECORE_CACHE_MAX_MB", "0")  # unbounded while filling
    for n, key in enumerate(keys):
        cache.put(key, _artifact())
        os.utime(cache.path(key), (1000 + n, 1000 + n))  # key 0 oldest ... key 9 newest
    assert cache.get(keys[0]) is not None  # a hit makes key 0 the most recently used
    assert cache.trim(10 * size) == 0  # at the limit: nothing to do
    removed = cache.trim(5 * size)  # over: evict down to 80% = 4 entries
    assert removed == 6
    left = sorted(os.path.basename(p)[:2] for _, _, p in cache.entries())
    assert left == ["00", "07", "08", "09"]


def test_size_limit_is_checked_on_writes(tmp_path, monkeypatch):
    root = str(tmp_path)
    entry = len(C.encode_entry("aa" + "0" * 62, _artifact()))
    monkeypatch.setenv("TILECORE_CACHE_MAX_MB", str(3.5 * entry / 1e6))
    monkeypatch.setattr(C, "_writes_since_trim", {})
    cache = C.DiskCache(root)
    for i in range(C._TRIM_EVERY + 2):
        cache.put(f"{i:02x}" + "1" * 62, _artifact())
    # write 33 ran the check: 33 entries trimmed to 80% of 3.5 (2 entries), then one more write
    assert len(cache.entries()) == 3
    monkeypatch.setenv("TILECORE_CACHE_MAX_MB", "not a number")
    with pytest.raises(EnvSettingError, match="TILECORE_CACHE_MAX_MB='not a number'.*expected a number"):
        C.cache_max_bytes()
    monkeypatch.setenv("TILECORE_CACHE_MAX_MB", "0")
    assert C.cache_max_bytes() is None
