#!/usr/bin/env python3
"""Finds ExecuTorch's sliding-window convention by running it: AttentionMHA with the ring cache its exporter
installs (adapter.py's Model: RingKVCache, or CustomRingKVCache with custom_sdpa in the custom variant), or,
in the pte variant, that model exported to a .pte and run by ExecuTorch's runtime (pte.py; W = 1 .. 3 there,
one export per W, every schedule on a fresh session of its program).

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

The sink variant (enable_attention_sink: KVCacheWithAttentionSink, RopeWithAttentionSink) runs the same
with S = 0 .. 3 sink tokens (--use_attention_sink S,W): spec §2's set is then the sinks 0 .. S - 1 plus the
window, and T = 40 > S + 2 W, so every query after the ring's wrap must still see the sinks. Its long
chunk is run with S = 0 and 1. And its RoPE positions, as measured (deviation 2): the frequencies
RopeWithAttentionSink gives position p are the plain Rope's at S + (p - S) mod 2 W from p = S + 2 W on,
not at p (and at p below that).
"""
import os
import sys
import types

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import adapter  # noqa: E402

D, T = 64, 40
WINDOWS = range(1, 7)
PTE_WINDOWS = range(1, 4)  # the pte variant: one export per window (about 10 s each on 2 cores)
ROPE = {"style": "neox", "theta": 10000.0, "scaling": "none", "rotary_dim": 0}


def shape(window, sinks=0):
    """What adapter.Model reads of a case: one sliding layer of window W (and S sinks), one head, f32."""
    return types.SimpleNamespace(Hq=1, Hkv=1, D=D, L=1, k_dtype="f32", max_tokens=T + 1,
                                 layers=[{"window": window, "sinks": sinks, "rope": ROPE}], is_sliding=lambda l: True,
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


def spec_set(t, window, sinks):
    """Spec §2: query t sees key j iff j <= t and (j < S or j > t - W)."""
    return [j for j in range(t + 1) if j < sinks or j > t - window]


def run(window, sizes, variant, sinks=0):
    """The visible keys of every query, the sequence sent in chunks of the given sizes."""
    model = adapter.Model(shape(window, sinks), variant, None)
    got, start = {}, 0
    for n in sizes:
        out = model.forward_chunk(chunk(start, n))  # [L][n][Hq][D]
        for i in range(n):
            got[start + i] = seen(out[0, i, 0])
        start += n
    return got


def run_exported(schedules):
    """pte: the visible keys of every (W, S, sizes) of schedules: one exported program per W (exports are slow: W =
    1 .. 3 only, PTE_WINDOWS), each schedule run on a fresh session of it (a newly loaded method)."""
    import pte
    got = {}
    for w in sorted({w for w, _, _ in schedules}):
        program = pte.Program(adapter.Model(shape(w), "pte", None))
        for sched in (x for x in schedules if x[0] == w):
            session, start, seen_by = program.session(), 0, {}
            for n in sched[2]:
                out = session.forward_chunk(adapter.hidden_states(chunk(start, n)), start)
                for i in range(n):
                    seen_by[start + i] = seen(out[0, i, 0])
                start += n
            got[sched] = seen_by
    return got


def main():
    variant = os.environ.get("RINGKV_ENGINE_VARIANT") or "ring"
    sink = bool(adapter.VARIANTS[variant].get("sink"))
    exported = bool(adapter.VARIANTS[variant].get("exported"))
    windows = PTE_WINDOWS if exported else WINDOWS
    schedules = [(w, s, tuple(sizes)) for w in windows for s in ((0, 1, 2, 3) if sink else (0,))
                 for sizes in ([1] * T, [w + 1] * (T // (w + 1)))] + \
                [(w, s, (w, w + 2)) for w in windows if w >= 2 for s in ((0, 1) if sink else (0,))]
    if exported:
        results = run_exported(schedules)
    else:
        results = {(w, s, sizes): run(w, sizes, variant, s) for w, s, sizes in schedules}
    failures = []
    for w in windows:
        for s in (0, 1, 2, 3) if sink else (0,):
            for path, sizes in (("decode", [1] * T), ("chunks", [w + 1] * (T // (w + 1)))):
                for t, (keys, uniform) in results[(w, s, tuple(sizes))].items():
                    want = spec_set(t, w, s)
                    if keys != want or not uniform:
                        failures.append(f"{path} W={w} S={s} query {t}: sees {keys}, spec §2: {want}")
    print(f"decode and chunks of W + 1: every query of W = {windows[0]}..{windows[-1]}{', S = 0..3' if sink else ''} sees spec §2's "
          f"{'sinks and ' if sink else ''}window ({variant})"
          if not failures else f"{len(failures)} deviations on decode / chunks of W + 1")
    # the long chunk: measured, deviation 1
    for w in (w for w in windows if w >= 2):
        for s in (0, 1) if sink else (0,):
            got = results[(w, s, (w, w + 2))]
            keys, _ = got[w]
            want = spec_set(w, w, s)
            lost = [j for j in want if j != 1]
            if keys != lost:
                failures.append(f"long chunk W={w} S={s}: query {w} (the chunk's first, after {w} tokens) sees {keys}, "
                                f"spec §2: {want}; measured before: {lost} (key 1, whose slot the chunk's last token "
                                f"took, lost)")
    if not failures:
        print("a chunk of W + 2 after earlier context: its first query loses keys of its window (deviation 1, as measured)")
    if sink:  # RopeWithAttentionSink's positions: measured, deviation 2
        before = len(failures)
        for w in range(1, 7):
            for s in (0, 1, 2, 3):
                model = adapter.Model(shape(w, s), variant, None)
                plain = adapter.Rope(model.args)
                for p in range(T):
                    remapped = p if p < s + 2 * w else s + (p - s) % (2 * w)
                    got = model.rope.get_freqs(torch.tensor([p]), 1)
                    want = plain.get_freqs(torch.tensor([remapped]), 1)
                    true = plain.get_freqs(torch.tensor([p]), 1)
                    if not all(torch.equal(a, b) for a, b in zip(got, want)) or \
                            (remapped != p and all(torch.equal(a, b) for a, b in zip(got, true))):
                        failures.append(f"RoPE W={w} S={s} position {p}: measured before: the plain Rope's at {remapped}")
        if len(failures) == before:
            print("RopeWithAttentionSink rotates position p >= S + 2 W as S + (p - S) mod 2 W, below it as p "
                  "(deviation 2, as measured)")
    for f in failures[:20]:
        print("FAILED:", f)
    if failures:
        sys.exit(1)
    print("ExecuTorch's window is spec §2's W (layer size W) on decode and chunks of up to W + 1 tokens" +
          (", its sinks spec §2's S (before and after the wrap)" if sink else ""))


if __name__ == "__main__":
    main()
