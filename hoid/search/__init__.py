"""The search: hoid's graphs in an e-graph (egglog), rewritten by rule sets and kernels, extracted by cost.

egglog is imported only when a search runs: `import hoid.search` stays light.
"""
