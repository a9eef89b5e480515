"""Helpers for testing kernels with hoid: `hoid.testing.strategies` holds hypothesis strategies.

Import `hoid.testing.strategies` explicitly: it imports hypothesis, which `import hoid` does not.
"""
