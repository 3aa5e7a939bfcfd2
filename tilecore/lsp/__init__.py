"""`tile lsp`: a language server that shows kernel errors, tile shapes and layouts while editing.

Install with `pip install tilecore[lsp]` (pygls); editor set-up in docs/editor.md.
Modules: server (pygls features, TCP), scheduling (worker processes, queues, time
budget), worker (the analysis process), analysis / document / facts (what the worker
computes), features (hover, inlay hints, fixes from a model), language_help (completion,
signatures, docs of `T.*`), positions, client (a blocking client for tests and scripts).
Importing this package imports neither pygls nor TVM.
"""
