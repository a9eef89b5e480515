"""The built-in ops, one module per family. Importing this package registers them all."""

from . import creation, elementwise, indexing, kernel, linalg, nn, reduction, shape  # noqa: F401
from . import selection  # noqa: F401  (beyond docs/ops.md core: ops imported models need)
