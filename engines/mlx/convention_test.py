#!/usr/bin/env python3
"""Finds which keys mlx-lm's ring cache lets each query see, on every path, by running it through the adapter.

One head, head dim 32, q = 0 and k = 0 (uniform attention over the visible keys), and V of the t-th
token appended the unit vector e_t: the output is 1/n at every visible token and 0 elsewhere. A
removed (trimmed) token keeps its own t, so a query that still sees it shows it.
Each path is the adapter's (adapter.MlxRing: the model's attention module, RotatingKVCache /
BatchRotatingKVCache, the masks built as the model builds them), for a ring of spec W, S sinks and
reserve Q (RotatingKVCache(max_size = S + W + Q, keep = S)):
  decode    tokens one at a time (RotatingKVCache._update_in_place)
  prefill   every token in one chunk, longer than the ring (_update_concat from empty)
  wrap      one at a time until the ring has wrapped, then a chunk of 5 (_update_concat after a wrap)
  trim      5 tokens, trim_prompt_cache(cache, 2), 8 more one at a time, trim 1, 2 more: every trim is
            also compared with spec 1.1 §5.1.2's honour rule (a refusal the spec does not make is a FINDING)
  batch     two sequences through BatchRotatingKVCache as BatchGenerator runs them: a right-padded
            prompt of 6 and 3 tokens (prepare / finalize), then one token each per step
Then why the committed golden case batch_generation_sinks_d64_bf16 passes although batch generation evicts
its sinks (docs/engines.md, mlx-lm): on its own schedule every query of index >= S + W sees the plain window of
S + W keys (its outputs move by O(1)), the same schedule on the single-sequence path keeps the sinks in
decode, and those outputs pass only because the bound of the bf16 profile the adapter declares (rope_angle
bf16) is at its cap 2 (max|v| + |o|) there: with rope_angle f32 the same outputs fail. And that
batch_generation_sinks_small_qk_d64_bf16 (the same layers, |q||k| small) judges deviation 2 under that bf16
profile: it fails on batch generation at exactly the decode queries whose sinks are evicted, every one of them,
and no other. And deviation 2's smallest schedule (B = 2, W = 1, S = 1, steps 2.1;1.1) shows it at one query.
First, the selection projections of adapter.Layer must pass q, k and v through bit for bit in f32, f16, bf16.
For each path, every query's visible set is compared with spec §2 (j <= i and (j < S or j > i - W)).
The paths and (W, S, Q) whose sets differ are printed as FINDINGs; the test exits 1 when the set of
differing paths is not KNOWN below (mlx-lm changed: look again, then update KNOWN and docs/engines.md).
"""
import os
import sys
from types import SimpleNamespace

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "docs", "examples"))
import adapter  # noqa: E402  (puts python/src, the ringkv package, on sys.path)
import golden_bound  # noqa: E402  (docs/examples: output_bound() in numpy, checked against the C++ in CI)
import read_golden_numpy  # noqa: E402
from ringkv.golden import read_case  # noqa: E402
from ringkv.replay import run_case  # noqa: E402

SINKS_CASE = os.path.join(HERE, "..", "..", "golden", "cases", "batch_generation_sinks_d64_bf16.safetensors")
SMALL_QK_CASE = os.path.join(HERE, "..", "..", "golden", "cases", "batch_generation_sinks_small_qk_d64_bf16.safetensors")

D = 32
ROPE = {"style": "neox", "theta": 10000.0, "scaling": "none", "factor": 1.0, "rotary_dim": None}
# (path, has sinks) -> what mlx-lm does instead of spec §2, as found by this test (docs/engines.md).
KNOWN = {
    ("prefill", True): "a chunk attends over a window of max_size = S + W keys with no sinks",
    ("wrap", True): "a chunk attends over a window of max_size = S + W keys with no sinks",
    ("batch", True): "BatchRotatingKVCache.merge drops keep: the sinks are evicted",
    ("trim refusal", False): "is_trimmable is offset < max_size: once the cache holds max_size tokens nothing is trimmed",
    ("trim refusal", True): "is_trimmable is offset < max_size: once the cache holds max_size tokens nothing is trimmed",
}


def make_engine(W, S, Q, B, max_tokens):
    case = SimpleNamespace(k_dtype="f32", v_dtype="f32", Hq=1, Hkv=1, D=D, L=1, B=B, max_tokens=max_tokens,
                           scale=1.0, sink_logits=[], steps=[],
                           layers=[{"window": W, "sinks": S, "rollback_reserve": Q, "rope": ROPE}])
    engine = adapter.MlxRing()
    engine.start(case)
    return engine


def chunk(seq, ids):
    """A chunk of tokens with q = k = 0 and V = e_id."""
    n = len(ids)
    v = np.zeros((1, n, 1, D), np.float32)
    for i, t in enumerate(ids):
        v[0, i, 0, t] = 1
    zeros = np.zeros((1, n, 1, D), np.float32)
    return SimpleNamespace(seq=seq, n=n, q=zeros, k=zeros, v=v)


def seen(out):
    """The ids a query's output [1][n][1][D] row shows, per row."""
    return [[t for t in range(D) if row[0, t] > 1e-6] for row in out[0]]


def spec(i, W, S):
    return [j for j in range(i + 1) if j < S or j > i - W]


class Run:
    """One sequence: ids[k] is the id (V = e_id) of the token that now has index k."""

    def __init__(self):
        self.ids, self.next_id, self.got, self.high = [], 0, [], 0  # high: spec 1.1's high-water mark H

    def take(self, n):
        new = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        return new

    def record(self, new, rows, W, S):
        for t, got in zip(new, rows):
            self.ids.append(t)
            i = len(self.ids) - 1
            want = [self.ids[j] for j in spec(i, W, S)]
            self.got.append((i, got, want))
        self.high = max(self.high, len(self.ids))

    def honoured(self, n, W, S, C):
        """Spec 1.1 §5.1.2's honour rule for one sliding layer of capacity C."""
        m = len(self.ids) - n
        lo = max(S, m - W + 1)
        return lo > m - 1 or lo + (C - S) >= self.high

    def roll_back(self, n, S):
        del self.ids[-n:]
        if len(self.ids) <= S:
            self.high = len(self.ids)


def single(W, S, Q, plan):
    """plan: a list of ("append", n) and ("trim", n) on one sequence. Returns (mismatches, notes)."""
    T = sum(n for what, n in plan if what == "append")
    engine = make_engine(W, S, Q, 1, max_tokens=T + 100)
    run, refusals = Run(), []
    for what, n in plan:
        if what == "append":
            new = run.take(n)
            out = engine.append([chunk(0, new)])[0]
            run.record(new, seen(out), W, S)
            continue
        spec_honours = run.honoured(n, W, S, S + W + Q)
        try:
            engine.rollback([(0, n)])
            refused = False
        except adapter.Refused:
            refused = True
        if refused == spec_honours:
            refusals.append(f"trim {n} of {len(run.ids)} (H {run.high}): mlx " + ("refuses" if refused else "honours") +
                            ", spec " + ("honours" if spec_honours else "refuses"))
        if not refused:
            run.roll_back(n, S)
    return [g for g in run.got if g[1] != g[2]], refusals


def batch(W, S, Q, steps=((6, 3),) + ((1, 1),) * 7):
    """Two sequences through BatchRotatingKVCache; steps: tokens per sequence in each step."""
    engine = make_engine(W, S, Q, 2, max_tokens=100)
    engine.batched = True
    engine.caches = [type(l.new_cache()).merge([l.new_cache() for _ in range(2)]) for l in engine.model.layers]
    runs, bad = [Run(), Run()], []
    for lengths in steps:
        news = [runs[b].take(n) for b, n in enumerate(lengths)]
        news = [[t + 16 * b for t in new] for b, new in enumerate(news)]  # sequence 1's ids from 16 on
        outs = engine.append([chunk(b, new) for b, new in enumerate(news)])
        for b in range(2):
            runs[b].record(news[b], seen(outs[b]), W, S)
    for b in range(2):
        bad += [(f"seq {b}",) + g for g in runs[b].got if g[1] != g[2]]
    return bad, []


def golden_run(path):
    """A committed case through the adapter as the golden run drives it (ringkv.replay.run_case): its
    metadata and tensors (docs/examples/read_golden_numpy), the case, the outputs in f64 and the
    profile the adapter declares for it."""
    meta, t = read_golden_numpy.read(path)
    case = read_case(path)
    engine = adapter.MlxRing()
    tensors, _ = run_case(case, engine)
    return meta, t, case, tensors["out"].astype(np.float64), engine.profile(case)


def smallest_batch_schedule():
    """Deviation 2's smallest schedule (docs/engines.md): B = 2, W = 1, S = 1, steps 2.1;1.1. Sequence 0's
    token 2, decoded in place at index S + W, sees {1, 2} where spec §2 has {0, 2}. Returns what differs."""
    bad, _ = batch(1, 1, 0, steps=((2, 1), (1, 1)))
    want = [("seq 0", 2, [1, 2], [0, 2])]
    return [] if bad == want else [f"B = 2, W = 1, S = 1, steps 2.1;1.1 gives {bad}, not {want}"]


def sinks_case_visible(batched, path=SINKS_CASE):
    """A committed case's own config and schedule (batch_generation_sinks_d64_bf16 unless `path` names
    another) with q = k = 0 and V of (seq, index) = e_{16 seq + index}, through the adapter: batch
    generation as the adapter picks it (batched), or the single-sequence path (per-sequence
    RotatingKVCache with keep). Returns (engine, {(seq, index, step): (seen, spec)} of the sliding
    layer's queries that differ from spec §2, the sliding layer)."""
    case = read_case(path)
    t = case.tensors
    t["q"][:], t["k"][:], t["v"][:] = 0, 0, 0  # the chunks hold views of these
    for r, (_, seq, index, _) in enumerate(t["rows"]):
        t["v"][:, r, :, 16 * seq + index] = 1
    engine = adapter.MlxRing()
    engine.start(case)
    if not batched:
        engine.batched = False
        engine.caches = [[layer.new_cache() for layer in engine.model.layers] for _ in range(case.B)]
    (l, layer), = [(l, lay) for l, lay in enumerate(case.layers) if lay["window"] < case.max_tokens]
    W, S = layer["window"], layer["sinks"]
    bad = {}
    for step in case.steps:
        for c, out in zip(step.chunks, engine.append(list(step.chunks))):
            for r in range(c.n):
                i = c.index + r
                got = [x - 16 * c.seq for x in range(case.D) if out[l, r, 0, x] > 1e-3]
                want = spec(i, W, S)
                if got != want:
                    bad[(c.seq, i, step.number)] = (got, want)
    return engine, bad, layer


def lost_sinks(engine, batch_bad, layer):
    """Problems with "on batch generation every query of index >= S + W, and only those, sees the plain
    window of the last S + W keys" (deviation 2), and the set of (seq, index) of those queries."""
    bad = []
    W, S = layer["window"], layer["sinks"]
    if not engine.batched or type(engine.caches[0]).__name__ != "BatchRotatingKVCache":
        bad.append(f"the adapter does not run it through BatchRotatingKVCache (batched {engine.batched}, "
                   f"caches {[type(c).__name__ for c in engine.caches]})")
    case = engine.case
    lengths = [sum(c.n for s in case.steps for c in s.chunks if c.seq == b) for b in range(case.B)]
    lost = {(b, i) for b in range(case.B) for i in range(S + W, lengths[b])}  # every query of index >= S + W
    if {(b, i) for b, i, _ in batch_bad} != lost or any(
            got != list(range(i - S - W + 1, i + 1)) for (b, i, _), (got, _) in batch_bad.items()):
        bad.append(f"batch generation: the queries that lose their sinks are not every query of index >= S + W "
                   f"seeing the plain window of S + W keys: {sorted(batch_bad.items())}")
    return bad, lost


def batch_generation_sinks_golden():
    """Why batch_generation_sinks_d64_bf16 passes although deviation 2 evicts its sinks (docs/engines.md, mlx-lm).
    Returns the parts of that explanation that no longer hold."""
    engine, batch_bad, layer = sinks_case_visible(batched=True)
    bad, lost = lost_sinks(engine, batch_bad, layer)
    if not any(step > 0 for _, _, step in batch_bad):
        bad.append("batch generation: no decode step loses the sinks")
    _, single_bad, _ = sinks_case_visible(batched=False)
    if any(step > 0 for _, _, step in single_bad):  # the first step's chunk of 7 is deviation 1's
        bad.append(f"the single-sequence path (keep) loses the sinks in decode too: {sorted(single_bad.items())}")
    # The case's own data (needles), through the adapter as it runs it, against the bound of docs/examples.
    meta, t, case, out, declared = golden_run(SINKS_CASE)
    rows = [r for r, (_, seq, i, _) in enumerate(t["rows"]) if (seq, i) in lost]
    err = np.abs(out - t["expected_f64"])[:, rows]
    full_bound = golden_bound.bounds(meta, t, declared)
    bound = full_bound[:, rows]
    cap = golden_bound.SAFETY * (t["dim.max_abs_v"] + t["dim.abs_out"])[:, rows]
    angle_f32 = golden_bound.bounds(meta, t, dict(declared, rope_angle="f32"))[:, rows]
    l = case.layers.index(layer)
    if declared["rope_angle"] != "bf16":
        bad.append(f"the adapter declares rope_angle {declared['rope_angle']} for bf16, not bf16")
    if err[l].max(axis=(1, 2)).min() < 0.5:
        bad.append(f"a query that lost its sinks moves by less than 0.5: {err[l].max(axis=(1, 2)).round(3).tolist()}")
    if (np.abs(out - t["expected_f64"]) > full_bound).any():
        bad.append("an output fails under the declared profile: the case no longer passes")
    hidden = err[l] > angle_f32[l]  # what a bound with f32 RoPE angles fails
    if not hidden.any():
        bad.append("with rope_angle f32 those outputs would pass too: the bf16 RoPE-angle term is not what hides them")
    if not np.allclose(bound[l][hidden], cap[l][hidden] + golden_bound.TINY[declared["output"]], rtol=1e-12):
        bad.append("an output that rope_angle f32 fails passes under a bound below its cap 2 (max|v| + |o|)")
    print(f"batch_generation_sinks_d64_bf16: batch generation (BatchRotatingKVCache) evicts the sinks at "
          f"{len(batch_bad)} queries ({sum(step > 0 for _, _, step in batch_bad)} in decode), the single-sequence "
          f"path at {len(single_bad)} (the first chunk's, deviation 1); those outputs move by "
          f"{err[l].max(axis=(1, 2)).min():.2f} to {err[l].max():.2f} and pass with rope_angle bf16 (worst "
          f"{(err[l] / bound[l]).max():.2f} of the bound); with rope_angle f32, {hidden.sum()} of their outputs fail "
          f"(worst {(err[l] / angle_f32[l]).max():.1f} of the bound), each under a bf16 bound at its cap 2 (max|v| + |o|)")
    return bad


def batch_generation_sinks_small_qk_golden():
    """batch_generation_sinks_small_qk_d64_bf16 judges deviation 2 under the declared bf16 profile: it
    fails on batch generation exactly where the sinks are evicted (docs/engines.md, mlx-lm). Returns the
    parts of that which no longer hold."""
    engine, batch_bad, layer = sinks_case_visible(batched=True, path=SMALL_QK_CASE)
    bad, lost = lost_sinks(engine, batch_bad, layer)
    if any(step == 0 for _, _, step in batch_bad):
        bad.append("a prompt query loses its sinks: the case no longer judges decode alone")
    _, single_bad, _ = sinks_case_visible(batched=False, path=SMALL_QK_CASE)
    if single_bad:
        bad.append(f"the single-sequence path (keep) loses sinks too: {sorted(single_bad.items())}")
    meta, t, case, out, declared = golden_run(SMALL_QK_CASE)
    if declared["rope_angle"] != "bf16":
        bad.append(f"the adapter declares rope_angle {declared['rope_angle']} for bf16, not bf16")
    ratio = np.abs(out - t["expected_f64"]) / golden_bound.bounds(meta, t, declared)
    l = case.layers.index(layer)
    row_worst = ratio.max(axis=(0, 2, 3))
    lost_rows = [r for r, (_, seq, i, _) in enumerate(t["rows"]) if (seq, i) in lost]
    kept_rows = [r for r, (_, seq, i, _) in enumerate(t["rows"]) if (seq, i) not in lost]
    failing = int((ratio[l][lost_rows].max(axis=(1, 2)) > 1).sum())
    if failing != len(lost_rows):
        bad.append(f"{len(lost_rows) - failing} of the {len(lost_rows)} queries that lost their sinks pass the "
                   "declared bound: the case no longer judges each of them")
    if (row_worst[kept_rows] > 1).any():
        bad.append(f"a query that keeps its sinks fails: {row_worst[kept_rows].max():.2f} of the bound")
    print(f"batch_generation_sinks_small_qk_d64_bf16: batch generation evicts the sinks at {len(batch_bad)} decode "
          f"queries (the single-sequence path at {len(single_bad)}); {failing} of them fail the declared bf16 bound "
          f"(worst {ratio[l][lost_rows].max():.1f} of it), every other query passes (worst "
          f"{row_worst[kept_rows].max():.2f})")
    return bad


def projections_exact():
    """The selection projections pass q, k and v through bit for bit (adapter.Layer), in every dtype."""
    rng = np.random.default_rng(1)
    bad = []
    for name, dtype in adapter.DTYPES.items():
        layer = adapter.Layer(4, 2, 16, dtype, 4, 0, 0, 100, ROPE, 0.25)
        model = adapter.Model([layer], dtype)
        q, k, v = (rng.standard_normal((1, 5, h, 16)).astype(np.float32) * 100 for h in (4, 2, 2))
        x = model.hidden(q, k, v)
        for proj, want in (("q_proj", q), ("k_proj", k), ("v_proj", v)):
            got = getattr(layer.attn, proj)(x)
            if not np.array_equal(np.asarray(got.astype(adapter.mx.float32)),
                                  np.asarray(adapter.mx.array(want.reshape(1, 5, -1)).astype(dtype).astype(adapter.mx.float32))):
                bad.append(f"{proj} {name}")
        o = layer.attn.o_proj(x[..., :4 * 16])
        o, x = np.asarray(o.astype(adapter.mx.float32)), np.asarray(x.astype(adapter.mx.float32))
        if not np.array_equal(o[..., :64], x[..., :64]) or o[..., 64:].any():
            bad.append(f"o_proj {name}")
    return bad


def main():
    found, failures = {}, []
    inexact = projections_exact()
    if inexact:
        failures.append("the selection projections are not exact: " + ", ".join(inexact))
    failures += [f"batch_generation_sinks_d64_bf16: {b} (docs/engines.md: look again)" for b in batch_generation_sinks_golden()]
    failures += [f"batch_generation_sinks_small_qk_d64_bf16: {b} (docs/engines.md: look again)"
                 for b in batch_generation_sinks_small_qk_golden()]
    failures += [f"deviation 2's smallest schedule: {b} (docs/engines.md: look again)" for b in smallest_batch_schedule()]
    for W in range(1, 7):
        for S, Q in ((0, 0), (2, 0), (4, 0), (0, 2)):
            C = S + W + Q
            paths = {"decode": lambda: single(W, S, Q, [("append", 1)] * 14),
                     "prefill": lambda: single(W, S, Q, [("append", 14)]),
                     "wrap": lambda: single(W, S, Q, [("append", 1)] * (C + 2) + [("append", 5)]),
                     "trim": lambda: single(W, S, Q, [("append", 1)] * 5 + [("trim", 2)] + [("append", 1)] * 8 +
                                            [("trim", 1)] + [("append", 1)] * 2),
                     "batch": lambda: batch(W, S, Q)}
            for path, fn in paths.items():
                bad, notes = fn()
                where = f"W={W} S={S} Q={Q} (max_size {C}, keep {S})"
                if bad:
                    first = bad[0]
                    print(f"FINDING {path:8s} {where}: {len(bad)} queries differ from spec §2; first: "
                          f"query {first[-3] if len(first) == 4 else first[0]} sees {first[-2]}, spec {first[-1]}"
                          + (f" [{first[0]}]" if len(first) == 4 else ""))
                    found.setdefault((path, S > 0), []).append(where)
                if notes:
                    print(f"FINDING {path:8s} {where}: " + "; ".join(notes))
                    found.setdefault((path + " refusal", S > 0), []).append(where)
    for key in sorted(set(found) | set(KNOWN)):
        if key in found and key not in KNOWN:
            failures.append(f"{key[0]} (sinks {key[1]}) differs from spec §2 in {found[key]}: not a known finding")
        elif key in KNOWN and key not in found:
            failures.append(f"{key[0]} (sinks {key[1]}): the known finding '{KNOWN[key]}' no longer shows")
    if failures:
        print("FAILED: mlx-lm's conventions are not what engines/mlx records:\n  " + "\n  ".join(failures))
        return 1
    print(f"mlx-lm {adapter.mlx_lm.__version__}: RotatingKVCache(max_size = S + W + Q, keep = S) with the model's mask "
          "(window_size = W, none with keep) gives spec §2's window in decode, prefill, wrap, trim and batch without "
          "sinks; known findings: " + "; ".join(f"{p} ({'with' if sinks else 'no'} sinks): {d}"
                                               for (p, sinks), d in sorted(KNOWN.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
