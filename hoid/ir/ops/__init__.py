"""The built-in ops, one module per family. Importing this package registers them all."""

from . import elementwise  # noqa: F401
from . import kernel  # noqa: F401
