"""Issue 16 (trust boundaries), the compile cache: who may write it, forged and malformed entries,
what `tile cache clear` and the size limit touch, what the key covers, and the options spec."""

from __future__ import annotations

import glob
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys

import pytest

import tilecore
from tilecore.envflags import EnvSettingError
from tilecore.plugin.backend import Artifact
from tilecore.plugin.options import OptionError, validate_options
from tilecore.runtime import api
from tilecore.runtime import cache as C
from tilecore.runtime.folders import UnsafeFolderError

sys.path.insert(0, os.path.dirname(__file__))
from test_plugin_support import clean_env, install_toy_and_broken, run_python, run_tile, simple_add_func  # noqa: E402


def _artifact():
    return Artifact(
        backend="toy",
        target="toy",
        entry="main",
        source="// code\n",
        blobs={"lib.so": b"\x7fELF" + bytes(200)},
        meta={"grid": [1]},
    )


KEY = "ab" + "5" * 62


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(folder))
    monkeypatch.delenv("TILECORE_CACHE_TRUSTED", raising=False)
    monkeypatch.delenv("TILECORE_CACHE", raising=False)
    monkeypatch.setenv("TILECORE_CONFIG", str(tmp_path / "no-config.toml"))
    api.clear_memory_cache()
    yield folder
    api.clear_memory_cache()


# ---------------------------------------------------------------------- finding 2: who may write it


def test_cache_folder_is_created_private(private_cache):
    C.DiskCache().put(KEY, _artifact())
    assert os.stat(private_cache).st_mode & 0o777 == 0o700
    assert os.stat(private_cache / C.SECRET_FILE).st_mode & 0o777 == 0o600


def test_cache_writable_by_others_is_refused_unless_trusted(private_cache, monkeypatch):
    private_cache.mkdir()
    os.chmod(private_cache, 0o777)
    with pytest.raises(UnsafeFolderError) as info:
        tilecore.compile(simple_add_func(32), target="reference", out_idx=[-1])
    msg = str(info.value)
    assert str(private_cache) in msg and "other users can write it" in msg
    assert f"chmod 700 {private_cache}" in msg and "TILECORE_CACHE_TRUSTED=1" in msg
    monkeypatch.setenv("TILECORE_CACHE_TRUSTED", "1")
    assert tilecore.compile(simple_add_func(32), target="reference", out_idx=[-1]) is not None
    assert len(C.DiskCache().entries()) == 1


def _other_user():
    """A throwaway local user (uid, gid), made with useradd; skips unless the test runs as root."""
    if os.geteuid() != 0:
        pytest.skip("the cross-user cases need root to act as a second uid (run as root in CI)")
    if shutil.which("useradd") is None:
        pytest.skip("useradd is not installed")
    name = "tcuntrusted"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], capture_output=True)
    import pwd

    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        pytest.skip("useradd could not create a test user")
    return entry.pw_uid, entry.pw_gid


def _as_user(uid, gid, script: str):
    """Run shell `script` as another uid (the attacker)."""

    def drop():
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    return subprocess.run(["/bin/sh", "-c", script], preexec_fn=drop, capture_output=True, text=True, timeout=60)


def test_cache_planted_by_another_user_is_refused(tmp_path, private_cache):
    """The attacker creates the victim's cache folder first and plants a support object and a
    forged entry in it; the victim's compile refuses the folder instead of loading their code."""
    uid, gid = _other_user()
    os.chmod(tmp_path, 0o1777)  # a shared parent, like /tmp
    for parent in tmp_path.parents:  # pytest's folders are 0700: let the other user reach tmp_path
        if str(parent).startswith("/tmp/pytest-of-"):
            os.chmod(parent, os.stat(parent).st_mode | 0o011)
    plant = (
        f"umask 022 && mkdir -p {private_cache}/native/cpu-support && "
        f"printf evil > {private_cache}/native/cpu-support/{'a' * 32}.o"
    )
    proc = _as_user(uid, gid, plant)
    assert proc.returncode == 0, proc.stderr
    assert os.stat(private_cache).st_uid == uid
    with pytest.raises(UnsafeFolderError, match="belongs to uid"):
        tilecore.compile(simple_add_func(32), target="reference", out_idx=[-1])
    with pytest.raises(UnsafeFolderError):
        C.DiskCache().get_native("cpu-support", "a" * 32 + ".o")


def test_rocm_device_library_is_private(tmp_path):
    """Finding 1: the ROCm atomics library lived at a fixed path in the temp folder, where another
    user could write it first; now it is in this process's private mkdtemp folder."""
    import tempfile

    rocm_device_lib = pytest.importorskip("tile_rocm.device_lib")  # moved into tile-rocm (issue 11)

    old_fixed = os.path.join(
        tempfile.gettempdir(),
        "tilecore_rocm_device_lib_" + hashlib.sha256(rocm_device_lib.library_ir().encode()).hexdigest()[:16] + ".ll",
    )
    path = rocm_device_lib.library_path()
    assert path != old_fixed
    folder = os.path.dirname(path)
    st = os.stat(folder)
    assert st.st_uid == os.geteuid() and st.st_mode & 0o777 == 0o700
    assert open(path).read() == rocm_device_lib.library_ir()
    with open(path, "w") as f:  # changed behind our back (only we can): rewritten, never used as is
        f.write("define void @tc_atomic_add_float32_global() { store float 42.0 }\n")
    assert open(rocm_device_lib.library_path()).read() == rocm_device_lib.library_ir()


# ---------------------------------------------------------------------- findings 2 and 7: forged, malformed


def _toy_env(tmp_path, **extra):
    site = install_toy_and_broken(tmp_path / "site")
    return clean_env(tmp_path, site, TOY_COUNTER=tmp_path / "compiles.txt", **extra)


COMPILE = """
import numpy as np, tilecore
from test_plugin_support import simple_add_func
k = tilecore.compile(simple_add_func(32), target="toy", out_idx=[-1])
a = np.arange(32, dtype=np.float32)
np.testing.assert_array_equal(k(a, a), 2 * a)
print("ok")
"""


def _compiles(env):
    path = env["TOY_COUNTER"]
    return len(open(path).read().splitlines()) if os.path.exists(path) else 0


def _rewrite_entry(path, header_change, payload_change=None, secret=b""):
    data = open(path, "rb").read()
    newline = data.index(b"\n", len(C.MAGIC))
    header = json.loads(data[len(C.MAGIC) : newline])
    header.pop("mac")
    payload = data[newline + 1 :]
    header_change(header)
    if payload_change:
        payload = payload_change(payload)
        header["size"] = len(payload)
    mac = hmac.new(secret, json.dumps(header, sort_keys=True).encode(), hashlib.sha256)
    mac.update(payload)
    header["mac"] = mac.hexdigest()
    open(path, "wb").write(C.MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload)


def test_forged_entry_is_rejected(tmp_path):
    """An entry whose checksum anyone can recompute was loaded on a cache hit; the keyed one is not."""
    env = _toy_env(tmp_path)
    run_python(COMPILE, env)
    (path,) = glob.glob(os.path.join(env["TILECORE_CACHE_DIR"], "*", "*.tcc"))
    # the forger swaps in another kernel (empty body) and signs it without the secret
    _rewrite_entry(path, lambda h: None, lambda p: p.replace(b'"body": [', b'"body": [ '))
    proc = run_python(COMPILE, env)
    assert proc.stdout.strip() == "ok" and "authentication code mismatch" in proc.stderr
    assert _compiles(env) == 2
    secret = C.DiskCache(env["TILECORE_CACHE_DIR"]).secret()
    assert C.decode_entry(open(path, "rb").read(), secret=secret).backend == "toy"  # replaced


@pytest.mark.parametrize("malformed", ["parts_not_a_list", "part_not_a_pair", "meta_not_a_dict"])
def test_malformed_but_authentic_entry_is_corruption(tmp_path, malformed):
    """Finding 7: `"parts"` not a list raised a raw TypeError from compile() on every call."""
    env = _toy_env(tmp_path)
    run_python(COMPILE, env)
    (path,) = glob.glob(os.path.join(env["TILECORE_CACHE_DIR"], "*", "*.tcc"))
    secret = C.DiskCache(env["TILECORE_CACHE_DIR"]).secret()

    def change(header):
        if malformed == "parts_not_a_list":
            header["parts"] = "artifact"
        elif malformed == "part_not_a_pair":
            header["parts"][0] = ["artifact"]

    payload_change = None
    if malformed == "meta_not_a_dict":
        payload_change = lambda p: p.replace(b'"meta": {', b'"meta": [{', 1)  # noqa: E731
    _rewrite_entry(path, change, payload_change, secret)
    with pytest.raises(C.CorruptEntry):
        C.decode_entry(open(path, "rb").read(), secret=secret)
    proc = run_python(COMPILE, env)
    assert proc.stdout.strip() == "ok" and "ignoring corrupt entry" in proc.stderr
    assert _compiles(env) == 2
    assert C.decode_entry(open(path, "rb").read(), secret=secret).backend == "toy"  # replaced
    run_python(COMPILE, env)
    assert _compiles(env) == 2


def test_native_object_with_a_wrong_digest_is_never_handed_out(private_cache):
    cache = C.DiskCache()
    name = "c" * 32 + ".o"
    cache.put_native("cpu-support", name, b"good object")
    assert cache.get_native("cpu-support", name) == b"good object"
    path = private_cache / "native" / "cpu-support" / name
    path.write_bytes(b"planted object")
    assert cache.get_native("cpu-support", name) is None
    assert not path.exists()  # deleted: the caller rebuilds it


# ---------------------------------------------------------------------- finding 6: clear and the size limit


def test_clear_removes_exactly_what_the_cache_made(private_cache):
    """With the cache folder set to a home folder, `clear` deleted the user's own *.tmp / *.tcc."""
    cache = C.DiskCache()
    cache.put(KEY, _artifact())
    cache.put_native("cpu-support", "d" * 32 + ".o", b"object")
    orphan = private_cache / "ab" / ".tc-999999-abc_1.tmp"
    orphan.write_bytes(b"half")
    mine = [
        private_cache / "notes.tmp",
        private_cache / "thesis.tcc",
        private_cache / "ab" / "mine.tcc",
        private_cache / "native" / "report.txt",
        private_cache / "docs" / ("e" * 64 + ".tcc"),
    ]
    for path in mine:
        path.parent.mkdir(exist_ok=True)
        path.write_text("the user's own file")
    assert C.DiskCache().clear() == 4  # entry, object, its digest, the orphaned temp file
    assert all(p.exists() for p in mine)
    assert not orphan.exists() and C.DiskCache().managed_files() == []
    assert (private_cache / C.SECRET_FILE).exists()


def test_size_limit_counts_native_objects_and_orphaned_temps(private_cache):
    """6.5 MB of libraries and temp files stayed under a 0.5 MB limit."""
    cache = C.DiskCache()
    for i in range(6):
        cache.put_native("cpu-support", f"{i:032x}.o", os.urandom(1_000_000))
        os.utime(private_cache / "native" / "cpu-support" / f"{i:032x}.o", (1000 + i, 1000 + i))
    dead = private_cache / "native" / "cpu-support" / ".tc-999999-x.tmp"
    dead.write_bytes(os.urandom(500_000))
    live = private_cache / "native" / "cpu-support" / f".tc-{os.getpid()}-y.tmp"
    live.write_bytes(b"being written")
    cache.trim(500_000)
    total = sum(size for kind, _, size, _ in cache.managed_files())
    assert total <= 500_000 and not dead.exists() and live.exists()
    assert [kind for kind, _, _, _ in cache.managed_files()] == ["temp"]


# ---------------------------------------------------------------------- finding 9: the key and the options


def test_option_encoding_is_canonical_and_typed():
    base = ("{}", "cpu", "0.1", "cpu")
    keys = {
        C.cache_key(*base, opts)
        for opts in (
            {"a": {1: "x"}},
            {"a": {"1": "x"}},
            {"a": (1, 2)},
            {"a": [1, 2]},
            {"a": 1},
            {"a": 1.0},
            {"a": True},
            {"a": "1"},
        )
    }
    assert len(keys) == 8
    assert C.cache_key(*base, {"a": {"x": 1, "y": 2}}) == C.cache_key(*base, {"a": {"y": 2, "x": 1}})


def test_unknown_and_mistyped_options_name_the_valid_ones(private_cache):
    with pytest.raises(OptionError) as info:
        tilecore.compile(simple_add_func(32), target="npu", out_idx=[-1], scratchpad_byte=4096)
    assert "unknown compile option 'scratchpad_byte'" in str(info.value)
    assert "scratchpad_bytes (int, default 1048576)" in str(info.value)
    with pytest.raises(OptionError, match="cores='4' for backend 'npu' must be a int, not str"):
        tilecore.compile(simple_add_func(32), target="npu", out_idx=[-1], cores="4")
    with pytest.raises(OptionError, match="set by compile's own argument"):
        validate_options("npu", (), {"target": "cpu"})


def test_edited_plugin_source_is_a_different_key(tmp_path):
    """An edited plugin reused old artifacts: its source digest is now part of the key."""
    env = _toy_env(tmp_path)
    run_python(COMPILE, env)
    run_python(COMPILE, env)
    assert _compiles(env) == 1
    plugin_file = tmp_path / "site" / "tile_toy" / "plugin.py"
    plugin_file.write_text(plugin_file.read_text() + "\n# a local edit\n")
    run_python(COMPILE, env)
    assert _compiles(env) == 2


def test_environment_switches_accept_only_documented_values(tmp_path):
    env = clean_env(tmp_path, TILECORE_DISABLE_PLUGIN_AUTOLOAD="2")
    run_python("import tilecore; tilecore.compile", env)  # importing never breaks
    proc = run_python("import tilecore\nfrom tilecore.plugin import get_registry\nget_registry()", env, check=False)
    assert proc.returncode != 0
    assert "TILECORE_DISABLE_PLUGIN_AUTOLOAD='2' is not a valid setting" in proc.stderr
    assert "1, true, yes, on" in proc.stderr
    cli = run_tile(["backends"], env)  # the `tile` command says so too, without a traceback
    assert cli.returncode == 1 and "Traceback" not in cli.stderr
    assert cli.stderr.startswith("error: TILECORE_DISABLE_PLUGIN_AUTOLOAD='2' is not a valid setting")
    with pytest.raises(EnvSettingError, match="TILECORE_CACHE='maybe'"):
        os.environ["TILECORE_CACHE"] = "maybe"
        try:
            C.cache_enabled()
        finally:
            del os.environ["TILECORE_CACHE"]


def test_unknown_cpu_option_is_an_error_before_any_codegen():
    """`sourse="asm"` was accepted silently by tile-cpu."""
    pytest.importorskip("tile_cpu")
    with pytest.raises(OptionError) as info:
        tilecore.compile(simple_add_func(32), target="cpu", out_idx=[-1], sourse="asm")
    assert "unknown compile option 'sourse' for backend 'cpu'" in str(info.value)
    assert "source ('llvm'|'asm', default 'llvm')" in str(info.value)


# ---------------------------------------------------------------------- properties

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2, allow_nan=False), st.sampled_from(["", "1", "a"])
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.one_of(st.integers(0, 2), st.sampled_from(["0", "1", "k"])), inner, max_size=3),
    ),
    max_leaves=8,
)


def _typed_equal(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_typed_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return (
            a.keys() == b.keys()
            and all(_typed_equal(k, k) and _typed_equal(a[k], b[k]) for k in a)
            and {type(k) for k in a} == {type(k) for k in b}
        )
    return a == b or (a != a and b != b)


@settings(max_examples=150, deadline=None)
@given(_values, _values)
def test_option_encoding_tells_apart_exactly_the_typed_different_values(a, b):
    same = C.canonical_encoding(a) == C.canonical_encoding(b)
    assert same == _typed_equal(a, b)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_damaged_entry_is_corruption_never_another_error(data):
    secret = b"k" * 32
    good = C.encode_entry(KEY, _artifact(), secret)
    damaged = bytearray(good)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(damaged) - 1))
        damaged[i] = data.draw(st.integers(0, 255))
    try:
        assert C.decode_entry(bytes(damaged), KEY, secret) == _artifact()
    except C.CorruptEntry:
        pass


# ---------------------------------------------------------------------- temp folders after a SIGKILL


def test_orphaned_tempdirs_are_removed_and_nothing_else(tmp_path):
    """Only `process_tempdir` folders of this purpose, of your own, whose process is gone."""
    from tilecore.runtime.folders import process_tempdir, remove_orphaned_tempdirs

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    orphan = tmp_path / f"tilecore-libs-{dead}-abc123"
    alive = tmp_path / "tilecore-libs-1-abc123"  # pid 1 always runs
    other_purpose = tmp_path / f"tilecore-other-{dead}-abc123"
    lookalike = tmp_path / f"tilecore-libs-{dead}-abc123.txt"
    for folder in (orphan, alive, other_purpose):
        folder.mkdir()
        (folder / "lib.so").write_bytes(b"x")
    lookalike.write_text("the user's file")
    made = process_tempdir("libs", str(tmp_path))
    assert not orphan.exists() and os.stat(made).st_mode & 0o777 == 0o700
    assert alive.exists() and other_purpose.exists() and lookalike.exists()
    if os.geteuid() == 0:  # a folder of another uid is never yours to remove
        uid, gid = _other_user()
        theirs = tmp_path / f"tilecore-libs-{dead}-theirs"
        theirs.mkdir()
        os.chown(theirs, uid, gid)
        assert remove_orphaned_tempdirs(str(tmp_path), "libs") == 0 and theirs.exists()
