"""`tile cache [info|clear]`: where the compile cache is, how big it is, and emptying it."""

from __future__ import annotations

import sys


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "cache",
        help="show or clear the on-disk compile cache",
        description="The compile cache lives in $TILECORE_CACHE_DIR, else "
        "~/.cache/tilecore; TILECORE_CACHE=0 turns it off.",
    )
    p.add_argument("action", nargs="?", choices=("info", "clear"), default="info")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..runtime import cache

    disk = cache.DiskCache()
    if args.action == "clear":
        print(f"removed {disk.clear()} file(s) from {disk.root} (entries, native objects, temporary files)")
        return 0
    counts = {"entry": 0, "native": 0, "temp": 0}
    size = 0
    for kind, _, nbytes, _ in disk.managed_files():
        counts[kind if kind in counts else "native"] += kind != "digest"
        size += nbytes
    state = "on" if cache.cache_enabled() else "off (TILECORE_CACHE=0)"
    limit = cache.cache_max_bytes()
    limit_text = "none" if limit is None else f"{limit / 1e6:.0f} MB (TILECORE_CACHE_MAX_MB)"
    sys.stdout.write(
        f"cache: {disk.root}\nstate: {state}\nentries: {counts['entry']}, native objects: "
        f"{counts['native']}, temporary files: {counts['temp']} ({size / 1e6:.1f} MB)\n"
        f"limit: {limit_text}\n"
    )
    return 0
