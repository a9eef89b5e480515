"""Tokens of a `.hoid` document: one `Line` at a time, each token with its column.

Value and graph names are `%name` / `@name`, or the sigil followed by a JSON string for names with
other characters; strings are JSON; numbers are read as Python writes them (`1e-06`, `-inf`; `inf`
and `nan` are words). `#` starts a comment that runs to the end of the line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..errors import ParseError

# One alternative per token kind, tried in order at each position. A quoted name (`%"a b"`) or a
# string matches only its opening: `Line._string` reads the JSON string itself, escapes included.
_TOKEN = re.compile(r"""
    (?P<space>\s+) | (?P<comment>\#.*)
  | (?P<name>[%@](?:[A-Za-z0-9_.]+|(?=")))
  | (?P<number>-inf\b|-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)
  | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<string>(?="))
  | (?P<punct>[()\[\]{},=:])
""", re.VERBOSE)


@dataclass(frozen=True)
class Token:
    """One token: `value` is what it means (a name without its sigil, a decoded string, a number)."""

    kind: str  # "%", "@", "int", "float", "word", "string", a punctuation character, or "eol"
    value: Any
    column: int  # 1-based
    text: str


class Line:
    """The tokens of one line, with a cursor; `error` makes a ParseError pointing into this line."""

    def __init__(self, number: int, text: str):
        self.number, self.text = number, text
        self.tokens = self._tokenize()
        self.pos = 0

    def error(self, message: str, token: Token | None = None, expected: str = "") -> ParseError:
        column = (token or self.peek()).column
        return ParseError(message, line=self.number, column=column, text=self.text, expected=expected)

    def _tokenize(self) -> list[Token]:
        tokens, pos, text = [], 0, self.text
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise ParseError(f"unexpected character {text[pos]!r}", line=self.number, column=pos + 1,
                                 text=text, expected="a name (%x), a number, a string, a word or ()[]{},=:")
            kind, end = m.lastgroup, m.end()
            if kind in ("name", "string") and text.startswith('"', end):
                value, end = self._string(end)
                tokens.append(Token(text[pos] if kind == "name" else "string", value, pos + 1, text[pos:end]))
            elif kind == "name":
                tokens.append(Token(text[pos], text[pos + 1:end], pos + 1, text[pos:end]))
            elif kind == "number":
                word = m.group()
                kind = "float" if word == "-inf" or any(c in word for c in ".eE") else "int"
                tokens.append(Token(kind, (float if kind == "float" else int)(word), pos + 1, word))
            elif kind == "word":
                tokens.append(Token("word", m.group(), pos + 1, m.group()))
            elif kind == "punct":
                tokens.append(Token(m.group(), m.group(), pos + 1, m.group()))
            pos = end
        tokens.append(Token("eol", None, len(text) + 1, ""))
        return tokens

    def _string(self, start: int) -> tuple[str, int]:
        """The JSON string opening at `start`, and the position just after it."""
        try:
            return json.JSONDecoder().raw_decode(self.text, start)
        except json.JSONDecodeError as e:
            unterminated = e.msg.startswith("Unterminated")
            raise ParseError("unterminated string" if unterminated else f"invalid string: {e.msg}",
                             line=self.number, column=start + 1, text=self.text,
                             expected='a closing " on the same line' if unterminated
                             else 'a JSON string such as "text"') from None

    @property
    def empty(self) -> bool:
        return self.tokens[0].kind == "eol"

    def peek(self) -> Token:
        return self.tokens[self.pos]

    def next(self) -> Token:
        token = self.tokens[self.pos]
        self.pos += token.kind != "eol"
        return token

    def accept(self, kind: str, value: Any = None) -> Token | None:
        token = self.peek()
        if token.kind == kind and (value is None or token.value == value):
            return self.next()
        return None

    def expect(self, kind: str, expected: str, value: Any = None) -> Token:
        token = self.accept(kind, value)
        if token is None:
            found = self.peek()
            problem = "the line ends too early" if found.kind == "eol" else f"unexpected {found.text!r}"
            raise self.error(problem, found, expected)
        return token

    def end(self) -> None:
        self.expect("eol", "the end of the line")
