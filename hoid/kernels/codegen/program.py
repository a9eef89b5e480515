"""A region as statements (`emit.lower`'s result), and how one prints: what both kernel forms, the tile
kernel (`emit.py`) and the looped row kernel (`looped.py`), are made of."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Stmt:
    """`name = expr`, with the comment that heads it (the IR node or input it begins)."""

    name: str
    expr: str
    comment: str | None = None


@dataclass
class Program:
    """A region as statements: what either kernel form prints. stores: the `tl.store(...)` lines."""

    stmts: list[Stmt]
    stores: list[Stmt]
    args: list[str]
    dtypes: list[str]
    wide: bool


def print_stmt(stmt: Stmt, indent: str) -> list[str]:
    head = [f"{indent}# {stmt.comment}"] if stmt.comment else []
    return head + [f"{indent}{stmt.name} = {stmt.expr}" if stmt.name else f"{indent}{stmt.expr}"]
