import pytest

from hoid.agent import Budget, Spend


def test_parse_and_words():
    assert Budget.parse("10m") == Budget(minutes=10)
    assert Budget.parse("90s, 5 attempts") == Budget(minutes=1.5, attempts=5)
    assert Budget.parse("1h,2000 tokens,3 turns") == Budget(minutes=60, tokens=2000, turns=3)
    with pytest.raises(ValueError, match="expected e.g."):
        Budget.parse("ten minutes")
    with pytest.raises(ValueError, match="non-negative"):
        Budget(attempts=-1)


def test_spend_names_the_limit_that_stopped_it():
    spend = Spend()
    assert spend.exhausted(Budget(attempts=2)) is None
    spend.attempts = 2
    assert spend.exhausted(Budget(attempts=2)) == "budget spent: 2 attempts"
    spend.tokens = 10
    assert "tokens" in spend.exhausted(Budget(tokens=10))
    assert Spend().exhausted(Budget(minutes=0)) == "budget spent: 0 minutes"
