"""The names `hoid.optimize(agent=...)` and `hoid optimize --agent` accept: "library", "codegen", "dir:PATH",
"openai:MODEL", ... each built by a registered factory; `register_proposer` adds yours. The protocol a
proposer follows is `hoid.agent.proposer`'s; the built-in proposers are registered on first use, so that
importing this module imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable

from .proposer import Proposer

_FACTORIES: dict[str, Callable[[], Proposer]] = {}


_PREFIXES: dict[str, Callable[[str], Proposer]] = {}


def register_proposer(name: str, factory: Callable[..., Proposer]) -> None:
    """Make `agent=name` (and `hoid optimize --agent name`) build a proposer with `factory()`. A name
    ending in ":" is a prefix: `agent="dir:examples/kernels"` builds `factory("examples/kernels")`."""
    if name.endswith(":"):
        _PREFIXES[name] = factory
    else:
        _FACTORIES[name] = factory


def proposer_names() -> list[str]:
    """The names `optimize(agent=...)` accepts: registered proposers, and prefixes that take an argument."""
    _builtins()
    return sorted(_FACTORIES) + [f"{p}<arg>" for p in sorted(_PREFIXES)]


def proposers_for(agent) -> list[Proposer]:
    """`agent` as proposers: a name, a proposer, or a list of either (in the order they are asked)."""
    _builtins()
    items = agent if isinstance(agent, (list, tuple)) else [agent]
    out = []
    for item in items:
        if isinstance(item, str):
            prefix = next((p for p in _PREFIXES if item.startswith(p)), None)
            if prefix is not None:
                out.append(_PREFIXES[prefix](item[len(prefix):]))
                continue
            if item not in _FACTORIES:
                raise ValueError(f"unknown agent {item!r}: known proposers are {', '.join(proposer_names())}; "
                                 "or pass an object with .name and .propose(context)")
            out.append(_FACTORIES[item]())
        elif isinstance(item, Proposer):
            out.append(item)
        else:
            raise TypeError(f"agent {item!r} is not a proposer: it needs a `name` and `propose(context)`")
    names = [p.name for p in out]
    if len(set(names)) != len(names):
        raise ValueError(f"two proposers share a name in {names}: the journal keys attempts by name")
    return out


DEFAULT_AGENTS = ("library", "codegen")  # what `hoid.optimize` asks when no agent is named


def _builtins() -> None:
    if "library" not in _FACTORIES:
        from .library_proposer import LibraryProposer

        register_proposer("library", LibraryProposer)
    if "dir:" not in _PREFIXES:
        from .dir_proposer import DirectoryProposer

        register_proposer("dir:", DirectoryProposer)
    if "codegen" not in _FACTORIES:
        from .codegen_proposer import CodegenProposer

        register_proposer("codegen", CodegenProposer)
    if "openai:" not in _PREFIXES:  # the classes import openai only when a conversation starts
        from .advisory import AdvisoryProposer
        from .openai_proposer import OpenAIProposer

        register_proposer("openai:", OpenAIProposer)
        register_proposer("openai-advisor:", AdvisoryProposer)
