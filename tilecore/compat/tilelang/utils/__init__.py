"""`tilelang.utils`: the host helpers TileLang files import from it."""
