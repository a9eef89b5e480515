"""The runtime: Graph -> executable code, weight binding, state updates, CUDA-graph capture, `export`.

Arrives with the runtime issue; until then `hoid.run` (the reference interpreter) executes graphs.
"""
