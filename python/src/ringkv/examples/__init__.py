"""Example engines for the replay protocol (ringkv.replay): numpy_engine, with a planted-bug variant."""
