#!/usr/bin/env python3
"""llama.cpp's window convention, found by running it (gemma2 graph, llama_kv_cache_iswa), per path.

One layer, one head, head dim 16, q = k = 0 (every visible key gets the same score) and v of the
token at index j the unit vector e_j: the attention output of query i is the mean of the visible
values, so its nonzero entries are exactly the keys it saw. For sliding_window n_swa = 1 .. 6 and 14
tokens from position 0 (and from position 1000), on every path: decode (one llama_decode per token),
one chunk of 14 tokens, and chunks of 5 (across the window), each with flash attention on and off and
swa_full on and off. Every visible set is compared with spec §2 with W = n_swa (S = 0). A path that
differs is a finding: the test fails and prints it. The last line is the convention.
"""
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model as M  # noqa: E402

T, D = 14, 16


class Synthetic:
    """The fields of a golden case model.py reads."""

    def __init__(self, window):
        self.L, self.Hq, self.Hkv, self.D, self.R, self.B = 1, 1, 1, D, T, 1
        self.max_tokens, self.softcap = 64, None
        self.layers = [{"window": window, "sinks": 0,
                        "rope": {"style": "neox", "theta": 10000.0, "scaling": "none", "factor": 1.0, "rotary_dim": 0}}]
        v = np.zeros((1, T, 1, D), np.float32)
        v[0, np.arange(T), 0, np.arange(T)] = 1
        self.tensors = {"q": np.zeros((1, T, 1, D), np.float32), "k": np.zeros((1, T, 1, D), np.float32), "v": v}

    def is_sliding(self, layer):
        return self.layers[layer]["window"] < self.max_tokens


def visible_sets(window, flash, swa_full, chunk, p0):
    case = Synthetic(window)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.gguf")
        n, per = M.write_gguf(case, path)
        m = M.LlamaCppModel(path, 1, n_ctx=256, n_batch=32, n_seq=1, type_k="f32", type_v="f32", flash=flash,
                            swa_full=swa_full)
        seen = {}
        for start in range(0, T, chunk):
            rows = list(range(start, min(T, start + chunk)))
            for u in m.decode(rows, [p0 + r for r in rows], [0] * len(rows)):
                ids = np.rint(u["attn_norm-0"][:, case.L * per] / M.ID_SCALE).astype(int) - 1
                for i, o in zip(ids, u["kqv_out-0"]):
                    seen[int(i)] = set(np.nonzero(np.abs(o) > 1e-3)[0].tolist())
        m.close()
    return seen


def main():
    findings, paths = [], 0
    for flash in (False, True):
        for swa_full in (False, True):
            for chunk in (1, T, 5):
                for p0 in (0, 1000):
                    paths += 1
                    for w in range(1, 7):
                        seen = visible_sets(w, flash, swa_full, chunk, p0)
                        for i in range(T):
                            want = {j for j in range(i + 1) if j > i - w}
                            if seen.get(i) != want:
                                findings.append(f"flash {flash} swa_full {swa_full} chunk {chunk} p0 {p0} n_swa {w}: "
                                                f"query {i} saw {sorted(seen.get(i, []))}, spec §2 with W = n_swa: "
                                                f"{sorted(want)}")
                                break
    for f in findings:
        print("FINDING: " + f)
    if findings:
        print(f"FAILED: {len(findings)} path(s) differ from n_swa = W")
        return 1
    print(f"convention: sliding_window n_swa = W keys including the query's own (masked iff p_q - p_k >= n_swa), "
          f"identical on all {paths} paths (decode, chunk of {T}, chunks of 5; flash on/off; swa_full on/off; p0 0/1000)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
