"""The built-in ops, one module per family. Importing this package registers them all.

`selection` goes beyond the core list of docs/ops.md: ops that imported models need (topk).
"""

from . import creation, elementwise, indexing, kernel, linalg, nn, reduction, selection, shape, spatial  # noqa: F401
