#!/usr/bin/env python3
"""Finds jax.nn.dot_product_attention's window convention by running it, and checks the adapter's mapping.

One head, head dim 16, q = 0 (uniform attention over the visible keys) and V of key j the unit vector
e_j: the output is 1/n at every visible key j and 0 elsewhere.
1. Self-attention over 11 tokens with local_window_size = (w, 0): which keys does query 10 see?
2. Decode as the adapter runs it (adapter.decode_step, ring of W slots, arrays newest first,
   local_window_size = (0, W - 1)): the query at index 10, alone or last of a chunk of 3, must see
   spec §2's window, keys 10 - W + 1 .. 10.
Exit 0 when 1. finds "left = w keys before the query's own" and 2. gives spec §2's W, else 1."""
import os
import sys

import numpy as np
import jax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import adapter  # noqa: E402

D, T = 16, 10
eye = np.eye(D, dtype=np.float32)
failures = []


def seen(out):
    return [j for j in range(D) if out[j] > 1e-6]


for w in range(0, 8):
    q = np.zeros((1, T + 1, 1, D), np.float32)
    out = np.asarray(jax.nn.dot_product_attention(q, q, eye[:T + 1][None, :, None], local_window_size=(w, 0)))
    got = seen(out[0, T, 0])
    ok = got == list(range(T - w, T + 1))
    print(f"self-attention, local_window_size=({w}, 0): query {T} sees keys {got}" + ("" if ok else "  (expected left = w keys before it)"))
    if not ok:
        failures.append(f"(w, 0) = ({w}, 0)")
NONE = ("none", D, "none")
for W in range(1, 9):
    for n in (1, 3):  # decode, and the last query of a chunk of 3
        count = T + 1 - n  # tokens in the ring before the chunk (ring of W slots: token i in slot i mod W)
        ring = np.zeros((W, 1, D), np.float32)
        for i in range(max(0, count - W), count):
            ring[i % W, 0] = eye[i]
        nb = 1 << (n - 1).bit_length()
        order, n_keys = adapter.newest_first(W, count, n, nb)
        chunk_v = np.zeros((nb, 1, D), np.float32)
        chunk_v[:n, 0] = eye[count:T + 1]
        zeros = np.zeros((nb, 1, D), np.float32)
        out = adapter.decode_step(zeros, zeros, chunk_v, np.zeros_like(ring), ring, np.arange(nb, dtype=np.int32), order,
                                  np.int32(n), np.int32(n_keys), np.float32(1e4), np.float32(1), np.float32(1),
                                  *NONE, W, np.float32)[-1]
        got = seen(np.asarray(out)[n - 1, 0])  # V of key j is e_j
        want = list(range(T - W + 1, T + 1))
        print(f"adapter, W={W}, chunk of {n}: local_window_size=(0, {W - 1}) over newest-first arrays: query {T} sees keys {got}" +
              ("" if got == want else f"  (spec W={W}: {want})"))
        if got != want:
            failures.append(f"W={W} chunk of {n}")
if failures:
    print("FAILED: jax's local_window_size is not what adapter.py assumes: " + ", ".join(failures))
    sys.exit(1)
print(f"jax {jax.__version__}: local_window_size = (left, right) compares array indices aligned at the top left (query i "
      "with key i); left = w keys before the query's own, so spec §2's W is w = W - 1; the adapter's newest-first "
      "arrays make it (0, W - 1)")
