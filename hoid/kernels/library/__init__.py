"""The kernel library: one module (or folder) per kernel, each registering its `KernelSpec`."""
