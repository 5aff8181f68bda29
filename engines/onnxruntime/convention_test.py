#!/usr/bin/env python3
"""Finds GroupQueryAttention's window convention by running it, and checks the adapter's mapping.

One query head, one kv head, head dim 16, no RoPE, q = 0 (uniform attention over the visible keys)
and V of key j the unit vector e_j: the output is 1/n at every visible key j and 0 elsewhere. After
a past of 10 keys, the 11th token (index 10) is run with local_window_size = w for w = 1..8, in
one decode step and inside a chunk of 3. Spec §2's window W: the W keys j = t - W + 1 .. t.
Exit 0 when local_window_size = w shows exactly spec §2's window of w keys (what adapter.py assumes:
it passes W unchanged), else 1 with what was found."""
import os
import sys
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import adapter  # noqa: E402

D, T = 16, 10
case = SimpleNamespace(layers=[{"rope": {"style": "none"}}], Hq=1, Hkv=1, D=D, scale=1.0, softcap=None)


def visible(w, chunk):
    """Key indices the last query of a chunk (index T) sees with local_window_size = w."""
    session = adapter.gqa_model(case, 0, "f32", w, sink_logits=False)
    eye = np.eye(D, dtype=np.float32)
    past = T + 1 - chunk
    feeds = {"query": np.zeros((1, chunk, D), np.float32), "key": np.zeros((1, chunk, D), np.float32),
             "value": eye[past:T + 1][None], "past_key": np.zeros((1, 1, past, D), np.float32),
             "past_value": eye[:past][None, None], "seqlens_k": np.array([T], np.int32),
             "total_sequence_length": np.array(T + 1, np.int32), "query_seqlens": np.array([chunk], np.int32)}
    out = session.run(None, feeds)[0][0, -1]
    return [j for j in range(D) if out[j] > 1e-6]


failures = []
for chunk in (1, 3):
    for w in range(1, 9):
        got = visible(w, chunk)
        want = list(range(T - w + 1, T + 1))
        print(f"local_window_size={w}, chunk of {chunk}: query {T} sees keys {got}" + ("" if got == want else f"  (spec W={w}: {want})"))
        if got != want:
            failures.append(w)
if failures:
    print("FAILED: onnxruntime's local_window_size is not spec §2's W (W keys including the query's own): "
          "adapter.py's mapping (W unchanged) is wrong for this version")
    sys.exit(1)
print(f"onnxruntime {adapter.ort.__version__}: local_window_size = W means W keys including the query's own (spec §2's W)")
