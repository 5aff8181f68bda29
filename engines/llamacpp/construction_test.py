#!/usr/bin/env python3
"""Proves the generated Gemma 2 model (model.py) hands llama.cpp's attention exactly the case's q, k, v.

    construction_test.py [GOLDEN_DIR] [CASE]       (default: golden, decode_w8 and core_f32_gqa_ring)

1. numpy: for every token row, ggml's RMS norm (ggml_compute_forward_rms_norm_f32's arithmetic, in
   model.rms_scale_ggml) of sqrtf(n) * embedding returns the embedding bit for bit (model.embeddings
   raises otherwise), and the selection matrices pick exactly q, k, v.
2. llama.cpp: the case's tokens are decoded one sequence at a time and the graph tensors are read
   through cb_eval: `attn_norm-0` must equal the embedding rows bit for bit, `Vcur-l` the case's v, and
   `Kcur-l` / `Qcur-l` (after RoPE) must equal numpy's NEOX rotation of the case's k / q at the true
   positions within f32 rounding of the angle (ggml builds the angles in f32). (`Qcur-l` is named
   before gemma2's ggml_scale by f_attention_scale; the scale is judged through the outputs.) Prints one PASS line per case.
"""
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "src"))
sys.path.insert(0, HERE)
from ringkv.golden import read_manifest  # noqa: E402
import model as M  # noqa: E402


def neox(x, pos, theta, n_rot):
    """NEOX rotation in f64 (x [..., D], pos [R])."""
    x = x.astype(np.float64).copy()
    half = n_rot // 2
    inv = theta ** (-np.arange(half, dtype=np.float64) * 2 / n_rot)
    ang = pos[:, None].astype(np.float64) * inv[None]
    c, s = np.cos(ang)[:, None], np.sin(ang)[:, None]
    a, b = x[..., :half].copy(), x[..., half:n_rot].copy()
    x[..., :half], x[..., half:n_rot] = a * c - b * s, a * s + b * c
    return x


def check(case):
    E = M.embeddings(case)  # numpy part: raises unless the norm returns every row exactly
    n, per = M.hidden_layout(case)
    base_full, base_swa, fscale, n_rot = M.rope_params(case)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.gguf")
        M.write_gguf(case, path)
        extra = [f"{t}-{l}" for l in range(case.L) for t in ("Vcur", "Kcur", "Qcur")]
        m = M.LlamaCppModel(path, case.L, n_ctx=max(256, case.max_tokens * case.B), n_batch=max(64, case.R),
                            n_seq=case.B, type_k="f32", type_v="f32", extra=extra)
        worst = 0.0
        for s in range(case.B):
            rows = [r for r in range(case.R) if case.tensors["rows"][r][1] == s]
            first_reset = [int(st) for st, sq, _, _ in case.tensors.get("resets", np.zeros((0, 4), int)) if sq == s]
            if first_reset:  # positions after a reset restart: use the rows before the first reset
                rows = [r for r in rows if case.tensors["rows"][r][0] < first_reset[0]]
            pos = case.tensors["positions"][rows]
            ub = m.decode(rows, pos, [s] * len(rows))
            assert len(ub) == 1, "one ubatch expected"
            u = ub[0]
            norm = u["attn_norm-0"]
            assert np.array_equal(norm, E[rows]), "attn_norm-0 differs from the embedding rows"
            for l in range(case.L):
                v = u[f"Vcur-{l}"].reshape(len(rows), case.Hkv, case.D)
                assert np.array_equal(v, case.tensors["v"][l][rows]), f"Vcur-{l} is not v"
                theta = base_swa if case.is_sliding(l) else base_full
                k_rot = neox(case.tensors["k"][l][rows], pos * fscale, theta, n_rot)
                k = u[f"Kcur-{l}"].reshape(len(rows), case.Hkv, case.D)
                worst = max(worst, float(np.abs(k - k_rot).max()))
                q_rot = neox(case.tensors["q"][l][rows], pos * fscale, theta, n_rot)
                q = u[f"Qcur-{l}"].reshape(len(rows), case.Hq, case.D)
                worst = max(worst, float(np.abs(q - q_rot).max()))
        m.close()
    if worst > 1e-3 * (1 + case.max_position() / 1024):
        raise AssertionError(f"{case.name}: rotated q/k differ from numpy's NEOX rotation by {worst}")
    print(f"{case.name}: PASS: n_embd {n}, every embedding row through ggml's RMS norm exact, attn_norm-0 and Vcur "
          f"bit-identical, Kcur/Qcur within {worst:.2e} of an f64 NEOX rotation (f32 angles)")


def main():
    golden = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "golden")
    names = sys.argv[2:] or ["decode_w8", "core_f32_gqa_ring"]
    man = read_manifest(golden)
    for name in names:
        check(man.load(next(e for e in man if e.name == name)))


if __name__ == "__main__":
    main()
