"""tilecore backend "metal": Apple GPUs through TVM's Metal Shading Language codegen."""

__version__ = "0.1.0"
