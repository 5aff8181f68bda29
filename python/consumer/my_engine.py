"""A user's engine module for `pytest --ringkv-engine=my_engine:FACTORY` (ringkv's installed-tree test
copies this project out of the source tree and runs it against the pip-installed package).

A real project implements its own class with the protocol of ringkv.replay (name, start, reset,
append, and optionally capabilities, profile, unsupported, rollback); this one takes the numpy
example engine that ships in the package, once as it is and once with a planted off-by-one window."""
from ringkv.examples.numpy_engine import NumpyEngine


def make_engine():
    return NumpyEngine()


def make_buggy_engine():
    return NumpyEngine(window_error=1)  # sees W + 1 keys: ringkv must fail it
