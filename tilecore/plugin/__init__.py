"""Plugin framework: hookspecs, discovery, backend registry."""
import pluggy

from .backend import Artifact, Backend, Capabilities, TileModule, ToolchainStatus  # noqa: F401
from .hookspecs import PLUGIN_API_VERSION, PROJECT  # noqa: F401

hookimpl = pluggy.HookimplMarker(PROJECT)
