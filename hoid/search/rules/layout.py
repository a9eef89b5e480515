"""Layout: placeholder, filled in the next commit."""
from . import RuleSet

LAYOUT = RuleSet("layout", ())
