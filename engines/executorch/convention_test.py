#!/usr/bin/env python3
"""Finds ExecuTorch's sliding-window convention by running it: AttentionMHA with the ring cache its exporter
installs (adapter.py's Model: RingKVCache, or CustomRingKVCache with custom_sdpa in the custom variant).

One head, head dim 64, q = 0 and k = 0 (uniform attention over the visible keys) and V of the token at
position j the unit vector e_j: the output of the query at position t is 1/n at every key j it sees, 0
elsewhere. Layers with window W = 1 .. 6 (each layer_size W of replace_kv_cache_with_ring_kv_cache), one
sequence of T = 40 tokens from position 0, on three paths:

  decode:  one token per call (a runner's generate loop)
  chunks:  chunks of W + 1 tokens, the longest that keeps spec §2's window (below), one layer at a time
  long:    a first chunk of W tokens, then a chunk of W + 2 (within RingKVCache's 2 W slots for W >= 2)

Spec §2's window is "query i sees keys i - W + 1 .. i". Exit 0 when decode and chunks of up to W + 1 see
exactly spec §2's window at every query (the adapter then passes W as the layer size), and the long chunk
loses keys as measured (docs/engines.md, ExecuTorch, deviation 1: the chunk's own tokens overwrite the
slots of the keys its first queries still need, and the mask, built from the cached positions after the
update, hides them): its first query sees a strict part of its window, the overwritten keys missing.
"""
import os
import sys
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import adapter  # noqa: E402

D, T = 64, 40
ROPE = {"style": "neox", "theta": 10000.0, "scaling": "none", "rotary_dim": 0}


def shape(window):
    """What adapter.Model reads of a case: one sliding layer of window W, one head, f32."""
    return types.SimpleNamespace(Hq=1, Hkv=1, D=D, L=1, k_dtype="f32", max_tokens=T + 1,
                                 layers=[{"window": window, "rope": ROPE}], is_sliding=lambda l: True,
                                 max_position=lambda: T)


def chunk(start, n):
    v = np.zeros((1, n, 1, D), np.float32)
    for i in range(n):
        v[0, i, 0, start + i] = 1.0
    zeros = np.zeros((1, n, 1, D), np.float32)
    return types.SimpleNamespace(n=n, position=start, q=zeros, k=zeros, v=v)


def seen(out_row):
    keys = [j for j in range(D) if out_row[j] > 1e-7]
    want = 1.0 / len(keys) if keys else None
    return keys, bool(keys) and all(abs(out_row[j] - want) < 1e-6 for j in keys)


def run(window, sizes, variant):
    """The visible keys of every query, the sequence sent in chunks of the given sizes."""
    model = adapter.Model(shape(window), variant, None)
    got, start = {}, 0
    for n in sizes:
        out = model.forward_chunk(chunk(start, n))  # [L][n][Hq][D]
        for i in range(n):
            got[start + i] = seen(out[0, i, 0])
        start += n
    return got


def main():
    variant = os.environ.get("RINGKV_ENGINE_VARIANT") or "ring"
    failures = []
    for w in range(1, 7):
        for path, sizes in (("decode", [1] * T), ("chunks", [w + 1] * (T // (w + 1)))):
            for t, (keys, uniform) in run(w, sizes, variant).items():
                want = list(range(max(0, t - w + 1), t + 1))
                if keys != want or not uniform:
                    failures.append(f"{path} W={w} query {t}: sees {keys}, spec §2: {want}")
    print(f"decode and chunks of W + 1: every query of W = 1..6 sees spec §2's window ({variant})"
          if not failures else f"{len(failures)} deviations on decode / chunks of W + 1")
    # the long chunk: measured, deviation 1
    for w in range(2, 7):
        got = run(w, [w, w + 2], variant)
        keys, _ = got[w]
        want = list(range(1, w + 1))
        if keys != want[1:]:
            failures.append(f"long chunk W={w}: query {w} (the chunk's first, after {w} tokens) sees {keys}, spec §2: "
                            f"{want}; measured before: {want[1:]} (key 1, whose slot the chunk's last token took, lost)")
    if not failures:
        print("a chunk of W + 2 after earlier context: its first query loses keys of its window (deviation 1, as measured)")
    for f in failures[:20]:
        print("FAILED:", f)
    if failures:
        sys.exit(1)
    print("ExecuTorch's window is spec §2's W (layer size W) on decode and chunks of up to W + 1 tokens")


if __name__ == "__main__":
    main()
