"""Plugin framework: hookspecs, discovery, backend registry.

Plugin authors need `hookimpl` (to mark hook implementations) and the classes
of `tilecore.plugin.backend`; the hooks are documented in
`tilecore.plugin.hookspecs`.
"""

import pluggy

from .backend import Artifact, Backend, Capabilities, TileLangNames, TileModule, ToolchainStatus  # noqa: F401
from .hookspecs import PLUGIN_API_VERSION, PROJECT  # noqa: F401
from .options import Option, OptionError  # noqa: F401

hookimpl = pluggy.HookimplMarker(PROJECT)

from .manager import PluginLoadError, get_plugin_manager, register_plugin, reset_plugins, unregister_plugin  # noqa: E402,F401
from .registry import IRVersionMismatchError, TargetError, get_registry, resolve  # noqa: E402,F401

__all__ = [
    "Artifact",
    "Backend",
    "Capabilities",
    "TileLangNames",
    "TileModule",
    "ToolchainStatus",
    "PLUGIN_API_VERSION",
    "PROJECT",
    "Option",
    "OptionError",
    "hookimpl",
    "PluginLoadError",
    "get_plugin_manager",
    "register_plugin",
    "reset_plugins",
    "unregister_plugin",
    "IRVersionMismatchError",
    "TargetError",
    "get_registry",
    "resolve",
]
