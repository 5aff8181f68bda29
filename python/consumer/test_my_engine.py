"""The project's own tests run beside ringkv's cases."""
from my_engine import make_engine


def test_the_engine_declares_rollback():
    assert make_engine().capabilities()["rollback"] is True
