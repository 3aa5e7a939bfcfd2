"""The Tile IR version: the contract between the core and backend plugins.

Bump the major number for any change a backend could observe (a new node, a
changed field); backends declare the versions they accept.
"""

TILE_IR_VERSION = "1.0"
