"""The built-in ops, one module per family. Importing this package registers them all."""

from . import creation, elementwise, indexing, kernel, linalg, nn, reduction, shape  # noqa: F401
