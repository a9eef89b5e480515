"""Patterns: placeholder, filled in the next commit."""
from . import RuleSet

PATTERNS = RuleSet("patterns", ())
