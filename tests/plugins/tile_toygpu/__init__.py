"""A toy SIMT GPU backend built on tilecore's lowering toolkit (a test plugin, compile tier)."""

__version__ = "0.1"
