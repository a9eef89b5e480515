"""The built-in ops, one module per family. Importing this package registers them all.

`selection` and `special` go beyond the core list of docs/ops.md: ops that imported models need
(topk; log1p, expm1).
"""

from . import (  # noqa: F401
    creation,
    elementwise,
    indexing,
    kernel,
    linalg,
    nn,
    reduction,
    selection,
    shape,
    spatial,
    special,
)
