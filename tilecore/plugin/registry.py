"""The backend registry: every Backend the loaded plugins declare, and target resolution.

Targets are written `name` or `name:variant` ("cpu", "cuda:sm_90a"); the part
before the colon picks the backend. The default target is, in order:

1. the ``TILECORE_TARGET`` environment variable;
2. ``target = "..."`` in the config file (``$TILECORE_CONFIG``, else
   ``$XDG_CONFIG_HOME/tilecore/config.toml``, else ``~/.config/tilecore/config.toml``);
3. the highest-priority backend (other than ``reference``) whose ``device_present()``;
4. ``cpu`` when a cpu backend is installed;
5. ``reference``.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..diagnostics import TileError
from ..ir.version import TILE_IR_VERSION
from .backend import Backend, TileLangNames
from .manager import PluginLoadError, TilecorePluginManager, get_plugin_manager

# A backend's declaration: (plugin name, distribution, version, entry point, backend).
_Provider = Tuple[str, str, str, str, Backend]


class TargetError(TileError):
    """An unknown or unusable target name."""


class IRVersionMismatchError(TileError):
    """A backend does not accept the Tile IR version this tilecore produces."""

    def __init__(self, backend: Backend, ir_version: str = TILE_IR_VERSION):
        from .. import __version__

        self.backend = backend
        self.ir_version = ir_version
        dist = f"{backend.distribution} {backend.version}".strip() or "unknown distribution"
        accepted = ", ".join(backend.ir_versions) or "none"
        super().__init__(
            f"backend {backend.name!r} ({dist}) accepts Tile IR version(s) {accepted}, "
            f"but this tilecore {__version__} produces Tile IR {ir_version}. Install a release of "
            f"{backend.distribution or 'the plugin'} that supports Tile IR {ir_version}, or a "
            f"tilecore release that produces one of {accepted}."
        )


class ConfigError(TileError):
    """The tilecore config file cannot be read."""


def ir_version_accepted(declared: Iterable[object], ir_version: str = TILE_IR_VERSION) -> bool:
    """Whether a backend's declared versions include `ir_version`.

    A declared entry is an exact "major.minor", a bare "major", or "major.*"
    (any minor of that major).
    """
    major = ir_version.split(".")[0]
    for v in declared:
        v = str(v).strip()
        if v == ir_version or v == major or v == f"{major}.*":
            return True
    return False


class BackendRegistry:
    """Backends by name, the plugin that declared each, and registration problems."""

    def __init__(self, manager: TilecorePluginManager):
        self.manager = manager
        self.backends: Dict[str, Backend] = {}
        self.provider: Dict[str, str] = {}  # backend name -> plugin name
        self.registration_errors: List[PluginLoadError] = []
        self._devices: Dict[str, bool] = {}
        self._collect()

    @property
    def errors(self) -> List[PluginLoadError]:
        """Plugins that failed to import or register, and rejected backend declarations."""
        return list(self.manager.errors) + self.registration_errors

    def _collect(self) -> None:
        hook = self.manager.hook.tilecore_register_backends
        declared_by: Dict[str, List[_Provider]] = {}  # backend name -> [(plugin name, dist, version, target, backend)]
        # Call each plugin's hookimpl on its own so one failing plugin is recorded, not fatal.
        for impl in hook.get_hookimpls():
            info = self.manager.plugins.get(impl.plugin_name)
            dist = info.distribution if info else ""
            version = info.version if info else ""
            target = info.target if info else impl.plugin_name
            declared: List[Backend] = []
            try:
                kwargs = {"register": declared.append}
                impl.function(**{a: kwargs[a] for a in impl.argnames})
            except (Exception, SystemExit) as err:
                self.registration_errors.append(
                    PluginLoadError.from_exception(impl.plugin_name, dist, version, target, err)
                )
                continue
            for backend in declared:
                problem = _validate(backend)
                if problem:
                    self.registration_errors.append(
                        PluginLoadError(impl.plugin_name, dist, version, target, f"invalid backend: {problem}")
                    )
                    continue
                if not backend.distribution:
                    backend.distribution = dist
                if not backend.version:
                    backend.version = version
                declared_by.setdefault(backend.name, []).append((impl.plugin_name, dist, version, target, backend))
        for name in sorted(declared_by):
            self._adopt(name, declared_by[name])

    def _adopt(self, name: str, providers: List[_Provider]) -> None:
        """Register backend `name`, or refuse it when several plugins declare it (whatever the
        order of sys.path): a backend of tilecore itself (the built-in reference) is kept and the
        others refused; between plugins, none is used and the error names every distribution."""
        if len(providers) == 1:
            plugin, _, _, _, backend = providers[0]
            self.backends[name] = backend
            self.provider[name] = plugin
            return
        builtin = [
            p for p in providers if self.manager.plugins.get(p[0]) is not None and self.manager.plugins[p[0]].builtin
        ]
        who = sorted(
            f"{(p[1] + ' ' + p[2]).strip() or 'unknown distribution'} (plugin {p[0]!r}, entry point {p[3]})"
            for p in providers
        )
        if builtin:
            self.backends[name] = builtin[0][4]
            self.provider[name] = builtin[0][0]
            outcome = "tilecore's own is kept and the others are ignored"
        else:
            outcome = "none of them is used"
        dists = ", ".join(sorted({p[1] for p in providers if p[1]}))
        self.registration_errors.append(
            PluginLoadError(
                name,
                dists,
                "",
                ", ".join(sorted(p[3] for p in providers)),
                f"backend {name!r} is declared by {len(providers)} plugins: {' and '.join(who)}; "
                f"{outcome}. Uninstall all but one, or choose one with TILECORE_PLUGINS",
            )
        )

    # ------------------------------------------------------------------ queries

    def names(self) -> List[str]:
        return sorted(self.backends)

    def get(self, name: str) -> Optional[Backend]:
        return self.backends.get(name)

    def resolve(self, target: Optional[str] = None, check_ir: bool = True) -> Tuple[Backend, str]:
        """Return (backend, full target) for `target` (None: the default target).

        "cuda" expands to the backend's default target (its first `targets`
        entry); "cuda:sm_80" is kept when the backend accepts it. Raises
        TargetError for unknown names and IRVersionMismatchError when the
        backend does not accept this tilecore's Tile IR.
        """
        origin = "target"
        if target is None:
            target, origin = self.default_target_and_origin()
        if not isinstance(target, str) or not target.strip():
            raise TargetError(f"invalid target {target!r}: expected a name such as 'cpu' or 'cuda:sm_90a'")
        target = target.strip()
        name = target.split(":", 1)[0]
        backend = self.backends.get(name)
        if backend is None:
            raise TargetError(self._unknown_message(name, target, origin))
        if target == name:
            full = backend.targets[0] if backend.targets else name
        elif backend.accepts_target(target):
            full = target
        else:
            where = "" if origin == "target" else f" (from {origin})"
            raise TargetError(
                f"backend {name!r} does not accept target {target!r}{where}; its targets: {', '.join(backend.targets)}"
            )
        if check_ir:
            check_ir_version(backend)
        return backend, full

    def _unknown_message(self, name: str, target: str, origin: str) -> str:
        where = "" if origin == "target" else f" (from {origin})"
        msg = f"unknown target {target!r}{where}: no installed backend is named {name!r}"
        broken = [e for e in self.errors if e.name == name]
        if broken:
            e = broken[0]
            dist = f"{e.distribution} {e.version}".strip() or "unknown distribution"
            msg += f"; the plugin {e.name!r} ({dist}, {e.target}) failed to load: {e.error}"
        msg += f". Installed backends: {', '.join(self.names()) or 'none'}"
        if not broken:
            msg += f". Install the plugin (e.g. `pip install tile-{name}`) or run `tile backends`"
        return msg

    def device_present(self, backend: Backend) -> bool:
        """`backend.device_present()`, probed once per registry (a failing probe counts as no)."""
        if backend.name not in self._devices:
            self._devices[backend.name] = _device_present(backend)
        return self._devices[backend.name]

    def default_target(self) -> str:
        """The target used when none is given (see the module docstring for the order)."""
        return self.default_target_and_origin()[0]

    def default_target_and_origin(self) -> Tuple[str, str]:
        """The default target and where it came from (for messages and `tile backends`)."""
        env = os.environ.get("TILECORE_TARGET", "").strip()
        if env:
            return env, "TILECORE_TARGET"
        path, config = read_config()
        configured = config.get("target")
        if configured is not None:
            if not isinstance(configured, str) or not configured.strip():
                raise ConfigError(f"{path}: 'target' must be a non-empty string, got {configured!r}")
            return configured.strip(), f"config file {path}"
        present = [b for b in self.backends.values() if b.name != "reference" and self.device_present(b)]
        if present:
            best = max(present, key=lambda b: b.priority)  # max keeps the first among equals
            return best.name, f"device present for backend {best.name!r}"
        for fallback in ("cpu", "reference"):
            if fallback in self.backends:
                return fallback, "fallback"
        raise TargetError(
            "no backend is installed (not even the built-in 'reference'); run `tile backends` to see plugin load errors"
        )


def check_ir_version(backend: Backend, ir_version: str = TILE_IR_VERSION) -> None:
    """Raise IRVersionMismatchError when `backend` does not accept `ir_version`."""
    if not ir_version_accepted(backend.ir_versions, ir_version):
        raise IRVersionMismatchError(backend, ir_version)


def _device_present(backend: Backend) -> bool:
    try:
        return bool(backend.device_present())
    except Exception:  # a failing probe means "no device", never a crash
        return False


def _validate(backend: object) -> str:
    if not isinstance(backend, Backend):
        return f"expected tilecore.plugin.Backend, got {type(backend).__name__}"
    if not isinstance(backend.name, str) or not backend.name or ":" in backend.name:
        return f"backend name {backend.name!r} must be a non-empty string without ':'"
    if isinstance(backend.targets, str) or not all(isinstance(t, str) for t in backend.targets):
        return f"backend {backend.name!r}: targets must be a tuple of strings"
    backend.targets = tuple(backend.targets)
    if isinstance(backend.ir_versions, str) or not backend.ir_versions:
        return f"backend {backend.name!r}: ir_versions must be a non-empty tuple of strings"
    backend.ir_versions = tuple(str(v) for v in backend.ir_versions)
    if not callable(backend.toolchain_status):
        return f"backend {backend.name!r}: toolchain_status must be callable"
    return _validate_tilelang(backend)


def _validate_tilelang(backend: Backend) -> str:
    """Problems of `backend.tilelang`, the TileLang names it declares ("" when none)."""
    names = backend.tilelang
    if not isinstance(names, TileLangNames):
        return f"backend {backend.name!r}: tilelang must be a tilecore.plugin.TileLangNames"
    strings = list(names.targets) + list(names.primitives) + list(names.pass_configs.values())
    if (
        isinstance(names.targets, str)
        or isinstance(names.primitives, str)
        or not all(isinstance(x, str) and x for x in strings)
    ):
        return (
            f"backend {backend.name!r}: tilelang targets, primitives and pass config keys must be "
            "tuples / a dict of non-empty strings"
        )
    if names.device_version is not None and not callable(names.device_version):
        return f"backend {backend.name!r}: tilelang device_version must be callable or None"
    bad = [m for m in names.pass_configs if not (isinstance(m, str) and m.isidentifier())]
    if bad:
        return f"backend {backend.name!r}: tilelang pass config member names must be identifiers, got {bad!r}"
    return ""


# ---------------------------------------------------------------------- config file


def config_path() -> str:
    """Where the config file is looked for."""
    explicit = os.environ.get("TILECORE_CONFIG")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "tilecore", "config.toml")


def read_config() -> Tuple[str, Dict[str, Any]]:
    """(path, parsed table); an absent file is an empty table, a malformed one a ConfigError."""
    path = config_path()
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return path, {}
    except OSError as err:
        raise ConfigError(f"cannot read config file {path}: {err}") from None
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        return path, tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"config file {path} is not valid TOML: {err}") from None


# ---------------------------------------------------------------------- process-wide registry

_lock = threading.RLock()
_registry: Optional[BackendRegistry] = None


def get_registry() -> BackendRegistry:
    """The registry of the process-wide plugin manager (built on first use)."""
    global _registry
    with _lock:
        if _registry is None:
            _registry = BackendRegistry(get_plugin_manager())
        return _registry


def resolve(target: Optional[str] = None) -> Tuple[Backend, str]:
    """Shortcut for `get_registry().resolve(target)`."""
    return get_registry().resolve(target)


def _reset_registry() -> None:
    global _registry
    with _lock:
        _registry = None
