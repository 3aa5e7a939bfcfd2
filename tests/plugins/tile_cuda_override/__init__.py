"""A third-party plugin that overrides one lowering rule of the shipped cuda backend (a test plugin)."""

__version__ = "0.1"
