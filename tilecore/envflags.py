"""Environment switches: each accepts only its documented values and says so otherwise."""

from __future__ import annotations

import os
from typing import Optional

from .diagnostics import TileError

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


class EnvSettingError(TileError):
    """An environment variable holds a value its documentation does not allow."""


def env_flag(name: str, default: Optional[bool]) -> Optional[bool]:
    """The boolean switch `name`: 1/true/yes/on or 0/false/no/off (any case); unset or empty
    gives `default`; anything else raises EnvSettingError naming the accepted values."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise EnvSettingError(
        f"{name}={raw!r} is not a valid setting: use one of "
        f"{', '.join(TRUE_WORDS)} (on) or {', '.join(FALSE_WORDS)} (off), or unset it"
    )


def env_number(name: str, default: float, minimum: float = 0.0) -> float:
    """The numeric setting `name` (unset or empty: `default`); raises EnvSettingError otherwise."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        value = float("nan")
    if not value >= minimum:
        raise EnvSettingError(f"{name}={raw!r} is not a valid setting: expected a number >= {minimum:g}")
    return value
