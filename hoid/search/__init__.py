"""The search: hoid's graphs in an e-graph (egglog), rewritten by rule sets and kernels, extracted by cost.

    import hoid.search
    fast = hoid.search.rewrite(graph)                  # saturate every rule set, extract (H200 prices)
    result = hoid.search.search(graph)                 # the same, with .report: measured vs modelled
    space = hoid.search.SearchSpace(graph)             # or step by step:
    space.saturate(hoid.search.default_rulesets())     #   -> SaturationReport (why it stopped, size)
    space.add_kernel(hoid.search.Region.of(graph, names), spec)   # a verified kernel, at every match
    result = space.extract(hoid.search.AnalyticCost(), k=3)       # best graph and top-k finalists

egglog (and scipy) are imported only when a search runs: `import hoid.search` stays light.
"""

from __future__ import annotations

import importlib

# public name -> module that defines it; loaded on first access (PEP 562)
_EXPORTS = {
    "rewrite": "rewriting",  # not rewrite.py: a submodule of that name would shadow the function
    "search": "rewriting", "SearchResult": "rewriting", "SearchReport": "rewriting",
    "PricedCost": "prices", "Prices": "prices",
    "SearchSpace": "space", "Extracted": "space", "Finalist": "space",
    "Limits": "limits", "SaturationReport": "limits", "StopReason": "limits",
    "AnalyticCost": "cost", "MeasuredCost": "cost", "OpCall": "cost",
    "Region": "inject", "InjectedKernel": "inject",
    "Rule": "rules", "RuleSet": "rules", "default_rulesets": "rules",
    "apply_library": "library", "LibraryReport": "library",
    "check_rule": "soundness", "RuleCheck": "soundness",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'hoid.search' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value
