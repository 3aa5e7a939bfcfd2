"""Plugin discovery: one pluggy PluginManager for the project "tilecore".

Plugins are found through the entry-point group ``tilecore``; an entry point
names a module or object that implements hooks from `tilecore.plugin.hookspecs`.

Environment switches (read when plugins are first loaded, and again after
`reset_plugins()`):

* ``TILECORE_PLUGINS=a,b``: an allowlist of entry-point names; others are not
  imported at all.
* ``TILECORE_DISABLE_PLUGIN_AUTOLOAD=1``: import no entry point; only plugins
  registered explicitly with `register_plugin()` are used. Accepted values:
  1/true/yes/on, 0/false/no/off or unset; anything else is an error.

In both cases the built-in ``reference`` backend (`tilecore.interp.plugin`, part
of the tilecore distribution itself) stays available: it is the executable
definition of the language, and `tilecore.testing` compares every backend
against it.

A plugin that fails to import or to register is recorded as a `PluginLoadError`
(entry-point name, distribution, error) and shown by ``tile backends``; it never
breaks ``import tilecore`` or the other plugins.

Hooks the core calls go through `TilecorePluginManager.call`, which runs each
plugin's implementation itself, so an exception is reported as a
`PluginHookError` naming that plugin (entry point, distribution, version) and
the hook, never blamed on another plugin or on the backend.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import threading
import traceback as _traceback
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Pattern, Protocol, Tuple

import pluggy

from ..diagnostics import PluginHookError, TileError
from ..envflags import env_flag
from . import hookspecs
from .hookspecs import PROJECT

ENTRY_POINT_GROUP = "tilecore"

# Plugins that come with the tilecore distribution itself and are always loaded.
BUILTIN_PLUGINS: Dict[str, str] = {"reference": "tilecore.interp.plugin"}


@dataclass(frozen=True)
class PluginLoadError:
    """A plugin that could not be loaded or registered, as `tile backends` reports it."""

    name: str  # entry-point name (or backend name for registration conflicts)
    distribution: str  # the distribution that declared it ("" when unknown)
    version: str
    target: str  # the entry point's value, e.g. "tile_cuda.plugin"
    error: str  # one line: "ImportError: No module named 'foo'"
    traceback: str = ""

    @classmethod
    def from_exception(cls, name: str, dist: str, version: str, target: str, err: BaseException) -> "PluginLoadError":
        tb = "".join(_traceback.format_exception(type(err), err, err.__traceback__))
        return cls(name, dist, version, target, _one_line(err), tb)

    def describe(self) -> str:
        dist = f"{self.distribution} {self.version}".strip()
        where = ", ".join(part for part in (dist, self.target) if part)
        return f"plugin {self.name!r}{f' ({where})' if where else ''}: {self.error}"

    def to_dict(self) -> Dict[str, str]:
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "entry_point": self.target,
            "error": self.error,
        }


@dataclass(frozen=True)
class PluginInfo:
    """A loaded plugin: its name in the manager and the distribution that provides it."""

    name: str
    distribution: str
    version: str
    target: str
    plugin: Any
    builtin: bool = False


class TilecorePluginManager:
    """The pluggy manager plus what discovery found (loaded plugins and load errors)."""

    def __init__(self, autoload: Optional[bool] = None, allowlist: Optional[List[str]] = None):
        self.pm = pluggy.PluginManager(PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.plugins: Dict[str, PluginInfo] = {}
        self.errors: List[PluginLoadError] = []
        self.autoload = autoload_enabled() if autoload is None else autoload
        self.allowlist = plugin_allowlist() if allowlist is None else allowlist

    @property
    def hook(self) -> pluggy.HookRelay:
        """pluggy's hook relay (`manager.hook.tilecore_x(...)`), for callers that need pluggy's own loop."""
        return self.pm.hook

    # ------------------------------------------------------------------ loading

    def load_entry_points(self) -> None:
        """Import and register the plugins of the entry-point group (honouring the switches)."""
        seen = set()
        for ep in _entry_points():
            key = (ep.name, ep.value)
            if key in seen:  # the same distribution visible twice on sys.path
                continue
            seen.add(key)
            is_builtin = BUILTIN_PLUGINS.get(ep.name) == ep.value
            if not is_builtin:
                if not self.autoload:
                    continue
                if self.allowlist is not None and ep.name not in self.allowlist:
                    continue
            dist, version = _dist_of(ep)
            try:
                obj = ep.load()
            except (Exception, SystemExit) as err:  # a broken plugin must not break tilecore
                self._record(ep.name, dist, version, ep.value, err)
                continue
            self._register(obj, ep.name, dist, version, ep.value, builtin=is_builtin)
        if self.autoload and self.allowlist is not None:
            declared = {name for name, _ in seen}
            for name in self.allowlist:
                if name not in declared and name not in BUILTIN_PLUGINS:
                    self.errors.append(
                        PluginLoadError(
                            name,
                            "",
                            "",
                            "",
                            "listed in TILECORE_PLUGINS, but no installed "
                            "distribution declares a 'tilecore' entry point of that name",
                        )
                    )
        # Built-ins also load when tilecore runs from a source tree without its metadata.
        for name, module in BUILTIN_PLUGINS.items():
            if name not in self.plugins and not any(e.name == name for e in self.errors):
                try:
                    obj = importlib.import_module(module)
                except (Exception, SystemExit) as err:
                    self._record(name, "tilecore", _tilecore_version(), module, err)
                    continue
                self._register(obj, name, "tilecore", _tilecore_version(), module, builtin=True)

    def register(self, plugin: Any, name: Optional[str] = None, distribution: str = "", version: str = "") -> str:
        """Register a plugin object or module explicitly (no entry point needed); return its name.

        Raises ValueError when the name is taken or the hooks do not match the hookspecs.
        """
        name = name or getattr(plugin, "__name__", None) or f"plugin-{id(plugin):x}"
        target = getattr(plugin, "__name__", type(plugin).__name__)
        err = self._register(plugin, name, distribution, version, target, record=False)
        if err is not None:
            raise ValueError(f"cannot register plugin {name!r}: {err}")
        return name

    def unregister(self, name: str) -> None:
        """Remove a registered plugin by name (used by tests and interactive sessions)."""
        info = self.plugins.pop(name, None)
        if info is not None:
            self.pm.unregister(name=name)

    def _register(
        self, obj: Any, name: str, dist: str, version: str, target: str, builtin: bool = False, record: bool = True
    ) -> Optional[str]:
        try:
            self.pm.register(obj, name=name)
        except Exception as err:  # duplicate name, or a hookimpl whose arguments the spec lacks
            if record:
                self._record(name, dist, version, target, err)
            return _one_line(err)
        try:
            self.pm.check_pending()  # hookimpls named tilecore_* that match no hookspec
        except Exception as err:
            self.pm.unregister(name=name)
            if record:
                self._record(name, dist, version, target, err)
            return _one_line(err)
        self.plugins[name] = PluginInfo(name, dist, version, target, obj, builtin)
        return None

    def describe_plugin(self, name: str) -> str:
        """`plugin 'x' (distribution 1.0, entry point pkg.mod)` for messages."""
        info = self.plugins.get(name)
        if info is None:
            return f"plugin {name!r}"
        dist = f"{info.distribution} {info.version}".strip()
        where = ", ".join(p for p in (dist, f"entry point {info.target}" if info.target else "") if p)
        return f"plugin {name!r}{f' ({where})' if where else ''}"

    def call(self, hook_name: str, firstresult: bool = False, what: str = "", **kwargs: Any) -> Any:
        """Call hook `hook_name` as pluggy would (same order; the first non-None result when
        `firstresult`, else the list of results), but one implementation at a time, so a
        failure raises PluginHookError naming the plugin and the hook. `what` says what was
        being done ("for backend 'cpu'") in that message."""
        caller = getattr(self.pm.hook, hook_name)
        impls = caller.get_hookimpls()
        if any(getattr(i, "hookwrapper", False) or getattr(i, "wrapper", False) for i in impls):
            return caller(**kwargs)  # wrappers need pluggy's own call loop
        results: List[Any] = []
        for impl in reversed(impls):  # pluggy calls the last registered (and tryfirst) first
            try:
                result = impl.function(*[kwargs[a] for a in impl.argnames])
            except (TileError, RecursionError):  # a RecursionError is the kernel's size: see user_facing
                raise
            except Exception as err:
                text = str(err).strip().splitlines()
                raise PluginHookError(
                    f"{self.describe_plugin(impl.plugin_name)} failed in hook {hook_name}"
                    f"{' ' + what if what else ''}: {type(err).__name__}"
                    f"{': ' + text[0] if text else ''} (TILECORE_TRACEBACK=1 shows the plugin's "
                    f"traceback)",
                    impl.plugin_name,
                    hook_name,
                ) from err
            if result is not None:
                if firstresult:
                    return result
                results.append(result)
        return None if firstresult else results

    def _record(self, name: str, dist: str, version: str, target: str, err: BaseException) -> None:
        self.errors.append(PluginLoadError.from_exception(name, dist, version, target, err))


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")


def _entry_points() -> Iterable[_EntryPointLike]:
    """The entry points of the group "tilecore": a plain folder scan where it gives
    importlib.metadata's answer, else importlib.metadata itself."""
    found = _scan_entry_points(ENTRY_POINT_GROUP)
    if found is not None:
        return found
    return _metadata_entry_points()


def _metadata_entry_points() -> List[_EntryPointLike]:
    from importlib.metadata import entry_points

    try:
        return list(entry_points(group=ENTRY_POINT_GROUP))
    except TypeError:  # Python < 3.10 API
        return list(entry_points().get(ENTRY_POINT_GROUP, ()))


class _EntryPointLike(Protocol):
    """What discovery reads of an entry point: ours (`_EntryPoint`) or importlib.metadata's."""

    @property
    def name(self) -> str:
        """The entry point's name."""

    @property
    def value(self) -> str:
        """`module` or `module:attr`."""

    def load(self) -> Any:
        """The object the entry point names."""


class _EntryPoint:
    """One entry point read from a distribution's entry_points.txt (importlib.metadata's
    EntryPoint subset that discovery uses: name, value, group, dist, load())."""

    _PATTERN: Optional[Pattern[str]] = None

    def __init__(self, name: str, value: str, group: str, dist: "_Distribution"):
        self.name, self.value, self.group, self.dist = name, value, group, dist

    def load(self) -> Any:
        """The module (or the `module:attr` object) the entry point names."""
        import re
        from functools import reduce

        if _EntryPoint._PATTERN is None:  # importlib.metadata.EntryPoint.pattern
            _EntryPoint._PATTERN = re.compile(
                r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$"
            )
        match = _EntryPoint._PATTERN.match(self.value)
        if match is None:
            raise ValueError(f"malformed entry point value {self.value!r}")
        module = importlib.import_module(match.group("module"))
        return reduce(getattr, filter(None, (match.group("attr") or "").split(".")), module)


class _Distribution:
    """A *.dist-info / *.egg-info folder: Name and Version read from its metadata header."""

    def __init__(self, folder: str):
        self.folder = folder
        self._header: Optional[Dict[str, str]] = None

    def _read_header(self) -> Dict[str, str]:
        if self._header is None:
            header: Dict[str, str] = {}
            for fname in ("METADATA", "PKG-INFO"):
                try:
                    with open(os.path.join(self.folder, fname), encoding="utf-8") as f:
                        for line in f:
                            if not line.strip():
                                break  # the header ends at the first blank line
                            key, sep, value = line.partition(":")
                            if sep and key in ("Name", "Version") and key not in header:
                                header[key] = value.strip()
                    break
                except OSError:
                    continue
            self._header = header
        return self._header

    @property
    def metadata(self) -> Dict[str, str]:
        return self._read_header()

    @property
    def version(self) -> str:
        return self._read_header().get("Version", "")


def _scan_entry_points(group: str) -> Optional[List[_EntryPoint]]:
    """The group's entry points read straight from the metadata folders on sys.path.

    importlib.metadata gives the same answer but costs 40-60 ms to import and to parse
    every METADATA file with the email package. Returns None (use importlib.metadata)
    wherever the plain folder scan could differ: a sys.path entry that is a zip file or
    an egg, or a finder other than the standard PathFinder that provides distributions.
    """
    from importlib.machinery import PathFinder

    for finder in sys.meta_path:
        if finder is not PathFinder and hasattr(finder, "find_distributions"):
            return None
    seen = set()  # normalized distribution names: the first on sys.path wins, as in importlib.metadata
    found: List[_EntryPoint] = []
    for entry in sys.path:
        folder = entry or "."
        if folder.lower().endswith(".egg"):  # an egg's EGG-INFO: importlib.metadata knows those
            return None
        if not os.path.isdir(folder):
            if os.path.exists(folder):
                return None
            continue
        try:
            children = os.listdir(folder)
        except OSError:
            continue
        for child in children:
            stem, ext = os.path.splitext(child)
            if ext.lower() not in (".dist-info", ".egg-info"):
                continue
            name = re.sub(r"[-_.]+", "_", stem.partition("-")[0]).lower()
            if name in seen:
                continue
            seen.add(name)
            path = os.path.join(folder, child)
            try:
                with open(os.path.join(path, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except OSError:  # no entry points (or an egg-info file, not a folder)
                continue
            dist = None
            section = None
            for line in text.splitlines():
                line = line.strip()
                if not line or line.startswith(("#", ";")):
                    continue
                if line.startswith("[") and line.endswith("]"):
                    section = line[1:-1].strip()
                    continue
                if section != group:
                    continue
                key, sep, value = line.partition("=")
                if not sep:
                    continue
                dist = dist or _Distribution(path)
                found.append(_EntryPoint(key.strip(), value.strip(), group, dist))
    return found


def _dist_of(ep: _EntryPointLike) -> Tuple[str, str]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "", ""
    try:
        return dist.metadata["Name"] or "", dist.version or ""
    except Exception:
        return "", ""


def _tilecore_version() -> str:
    from .. import __version__

    return __version__


def autoload_enabled() -> bool:
    """False when TILECORE_DISABLE_PLUGIN_AUTOLOAD is 1/true/yes/on; an undocumented value
    raises tilecore.envflags.EnvSettingError."""
    return not env_flag("TILECORE_DISABLE_PLUGIN_AUTOLOAD", default=False)


def plugin_allowlist() -> Optional[List[str]]:
    """Entry-point names from TILECORE_PLUGINS, or None when every plugin is allowed."""
    raw = os.environ.get("TILECORE_PLUGINS")
    if raw is None or not raw.strip():
        return None
    return [n.strip() for n in raw.split(",") if n.strip()]


# ---------------------------------------------------------------------- process-wide manager

_lock = threading.RLock()
_manager: Optional[TilecorePluginManager] = None
_explicit: List[Tuple[Any, str, str, str]] = []  # (plugin, name, distribution, version), re-applied after a reset


def get_plugin_manager() -> TilecorePluginManager:
    """The process-wide manager; plugins are discovered on the first call."""
    global _manager
    with _lock:
        if _manager is None:
            manager = TilecorePluginManager()
            manager.load_entry_points()
            for plugin, name, dist, version in _explicit:
                manager.register(plugin, name, dist, version)
            _manager = manager
        return _manager


def register_plugin(plugin: Any, name: Optional[str] = None, distribution: str = "", version: str = "") -> str:
    """Register a plugin explicitly (works with TILECORE_DISABLE_PLUGIN_AUTOLOAD=1).

    The plugin stays registered across `reset_plugins(keep_explicit=True)`.
    """
    with _lock:
        manager = get_plugin_manager()
        name = manager.register(plugin, name, distribution, version)
        _explicit.append((plugin, name, distribution, version))
        _invalidate_dependents()
        return name


def unregister_plugin(name: str) -> None:
    """Undo `register_plugin`."""
    with _lock:
        _explicit[:] = [e for e in _explicit if e[1] != name]
        if _manager is not None:
            _manager.unregister(name)
        _invalidate_dependents()


def reset_plugins(keep_explicit: bool = False) -> None:
    """Forget discovered plugins so the next use rediscovers them (re-reading the environment)."""
    global _manager
    with _lock:
        _manager = None
        if not keep_explicit:
            _explicit.clear()
        _invalidate_dependents()


def _invalidate_dependents() -> None:
    from . import registry

    registry._reset_registry()
    api = sys.modules.get("tilecore.runtime.api")  # only if already imported
    if api is not None:
        api._forget_backend_state()
