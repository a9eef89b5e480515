import pytest

from hoid.agent import Budget, Spend


def test_parse_and_words():
    assert Budget.parse("10m") == Budget(minutes=10)
    assert Budget.parse("90s, 5 attempts") == Budget(minutes=1.5, attempts=5)
    assert Budget.parse("1h,2000 tokens,3 turns") == Budget(minutes=60, tokens=2000, turns=3)
    with pytest.raises(ValueError, match="expected e.g."):
        Budget.parse("ten minutes")
    # times written together add up (a benchmark run asked for "5m30s" and lost its hoid row to the refusal)
    assert Budget.parse("5m30s") == Budget(minutes=5.5)
    assert Budget.parse("1h 30m, 4 turns") == Budget(minutes=90, turns=4)
    assert Budget.parse("4") == Budget(minutes=4)
    for wrong in ("5ms", "5 mins", "m5", "5m 3 attempts"):
        with pytest.raises(ValueError, match="expected e.g."):
            Budget.parse(wrong)
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


def test_shares_give_a_turn_an_equal_part_of_the_minutes_left_and_a_batch_only_its_tails(monkeypatch):
    from types import SimpleNamespace

    from hoid.agent import budget as budget_module
    from hoid.agent.budget import Shares

    now = {"s": 1000.0}
    monkeypatch.setattr(budget_module, "time", SimpleNamespace(monotonic=lambda: now["s"]))
    shares = Shares(Budget(minutes=10), Spend(started=1000.0))  # 600 s left
    shares.begin_turn(3, batch=False, shared=True)  # one of three turns: 200 s
    now["s"] += 199
    assert shares.share_spent() is None and not shares.tails_wait()
    now["s"] += 2
    assert shares.turn_over() == shares.share_spent() == "its share of the budget's minutes is spent"
    shares.begin_turn(2, batch=True, shared=True)  # a batch: never cut, its tails within half of 399 s
    assert shares.tails_wait() and shares.share_spent() is None and shares.tails_over() is None
    now["s"] += 200
    assert shares.tails_over() == "its share of the budget's minutes is spent" and shares.turn_over() is None
    shares.begin_turn(1, batch=False, shared=True)  # the last turn: all that is left
    assert shares.share_spent() is None
    now["s"] += 200
    assert shares.out_of_time() == shares.turn_over() == "budget spent: 10 minutes"
    shares.end_turns()
    assert not shares.tails_wait() and shares.share_spent() is None
