#!/usr/bin/env python3
"""ringkv adapter for llama.cpp: its own KV cache (llama_kv_cache_iswa) and attention, through a generated model.

    adapter.py GOLDEN_DIR OUT_DIR [--ringkv RINGKV] [--filter REGEX] [--bug window+1|rope-from-slot]
    RINGKV_ENGINE_VARIANT=flash|noflash[-swafull][-perseq][-norot] (default flash: flash attention on, swa_full off,
    one unified KV buffer)

What runs is llama.cpp (vendored by llama-cpp-python 0.3.36, CPU, one thread) as an application runs
it, through its C API: per case a Gemma 2 GGUF written by model.py (its docstring: embeddings that
reach attention as exactly the case's q, k and v; the attention output of every layer read from the
graph tensor kqv_out-l through cb_eval), loaded with llama_model_load_from_file, and a context
(llama_init_from_model) with type_k / type_v from the case, flash_attn_type, swa_full, kv_unified
and n_seq_max = batch. The schedule is driven as a server drives it:
- each golden step is ONE llama_decode: the appending sequences' tokens, in sequence order, each with
  its true position and its sequence id (sit-outs simply have no tokens); n_batch = n_ubatch = the
  largest step, so llama.cpp splits nothing;
- a reset is llama_memory_seq_rm(mem, seq, -1, -1), then the new positions from p0 (llama.cpp accepts
  any first position of an empty sequence: settable p0);
- a rollback of n tokens is llama_memory_seq_rm(mem, seq, p0 + held - n, -1), as speculative decoding
  (common/speculative, llama-server) takes back rejected drafts. A false return is llama.cpp's
  refusal; the adapter reports ringkv.Refused only when that left the sequence unchanged
  (llama_memory_seq_pos_max), else it is an error. (llama_kv_cache::seq_rm returns true always.)
Window: the model's sliding_window n_swa = W (llama.cpp's rule: masked iff p_q - p_k >= n_swa, spec
§2.1; convention_test.py finds it by running). RoPE NEOX from the batch positions (llama.cpp's own).

Not expressible (capabilities.json, or unsupported per case), never emulated here: sink tokens
(llama.cpp has no attention sink tokens), learned sink logits (gemma2 has none; gpt-oss's are not
built here), gptj and no RoPE (gemma2's RoPE is NEOX), more than one sliding window (one n_swa per
model), per-layer RoPE beyond one theta for sliding and one for full layers (rope.freq_base_swa),
different rotary dims or scalings per layer, softmax scales other than 1/sqrt(D) (gemma2 scales q by
1/sqrtf(head_dim)), INT8 schemes other than q8_0 and fp8 (no such cache types).
"""
import itertools
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "src"))
sys.path.insert(0, HERE)
from ringkv import Refused  # noqa: E402
from ringkv.adapter import main  # noqa: E402
import llama_cpp  # noqa: E402
import model as M  # noqa: E402

BUGS = {"window+1": "the model's sliding_window written as W + 1 (llama.cpp then keeps one key too many)",
        "rope-from-slot": "positions given to llama_decode as the index mod W (a ring slot) instead of the true position"}

# A variant is "flash" or "noflash", then any of "-swafull" (swa_full on), "-perseq" (one KV buffer per
# sequence: kv_unified off) and "-norot" (LLAMA_ATTN_ROT_DISABLE=1: llama.cpp's q8_0 cache without its
# Walsh-Hadamard rotation, below), in that order.
VARIANT_OPTIONS = ("swafull", "perseq", "norot")
VARIANTS = tuple(a + "".join("-" + o for o, on in zip(VARIANT_OPTIONS, bits) if on)
                 for a in ("flash", "noflash") for bits in itertools.product((0, 1), repeat=3))

# llama.cpp rotates K and V before it stores them in a quantized cache (llama-kv-cache.cpp: attn_rot_k /
# attn_rot_v, on when the type is quantized and the head dim is a multiple of 64; llama-graph.cpp
# build_attn: q, k and v multiplied by an orthonormal Walsh-Hadamard matrix of order 64 before the
# cache, the attention output multiplied back after kqv_out). Its q8_0 codes are then those of H·k and
# H·v, not spec 1.1's q8_0 of k and v: another storage scheme, declared, not judged as q8_0.
# LLAMA_ATTN_ROT_DISABLE=1 (the -norot variants) turns the rotation off, and the plain q8_0 path is judged.
ROTATION = ("llama.cpp's q8_0 cache at head_dim {D} (a multiple of 64) stores the Walsh-Hadamard rotated "
            "K and V (attn_rot_k/attn_rot_v, llama-kv-cache.cpp): q8_0 codes of H·k and H·v, not spec 1.1's "
            "q8_0 of k and v (judged by the -norot variants, LLAMA_ATTN_ROT_DISABLE=1)")

# Precision (ggml-cpu ops.cpp and the type traits of this ggml), per path:
# - RoPE: ggml_rope_ext, angles in f32 (theta_scale = powf(base, -2/n_dims), products in f32): rope_angle f32;
# - gemma2 scales rotated q by f32 1/sqrtf(D) (ggml_scale) before attention;
# - no flash: kq = mul_mat(K, q): q converted to K's vec_dot_type (f16 for f16 K, bf16 for bf16 K,
#   q8_0 for q8_0 K, f32 for f32 K), sums f32; soft_max_ext in f32; kqv = mul_mat(V, P): P converted to
#   V's vec_dot_type (P rounded to f16/bf16), sums f32; output f32;
# - flash (ggml_compute_forward_flash_attn_ext_f16_one_chunk; the tiled path for >= Q_TILE queries with
#   f32/f16 K = V converts K and V to f32 instead, which is only more precise): q converted to K's
#   vec_dot_type, scores f32, online softmax f32, P·V accumulated in f16 (VKQ16, ggml_vec_mad_f16) when
#   V is f16, else V converted to f32 and accumulated in f32; output f32.
BASE = {"q_dot": "f32", "q_quant": "none", "k_storage": "as_configured", "v_storage": "as_configured",
        "qk_accumulator": "f32", "pv_accumulator": "f32", "p_before_pv": "f32", "output": "f32", "rope_angle": "f32"}


def profile_for(kd, vd, flash):
    p = dict(BASE)
    low = {"f16": "f16", "bf16": "bf16"}
    if kd in low:
        p["q_dot"] = low[kd]
    if kd == "int8":
        p["q_quant"] = "q8_0"
    if flash:
        # build_attn_mha (llama-graph.cpp): with flash attention an f32 K or V cache is cast to f16
        # (ggml_cast) before ggml_flash_attn_ext: the attention sees f16 K / V, so q goes to f16 and
        # P·V accumulates in f16 as for an f16 cache
        if kd == "f32":
            p["k_storage"], p["q_dot"] = "f16", "f16"
        if vd == "f32":
            p["v_storage"] = "f16"
        if vd in ("f16", "f32"):
            p["pv_accumulator"] = "f16"
    elif vd in low:
        p["p_before_pv"] = low[vd]
    return p


def cache_type(fmt):
    d = fmt.get("dtype")
    if d in ("f32", "f16", "bf16"):
        return d
    if d == "int8" and fmt.get("int8_scheme") == "q8_0":
        return "q8_0"
    return None


class LlamaCpp:
    def __init__(self, bug=None, variant=None):
        self.bug = bug
        self.variant = variant or os.environ.get("RINGKV_ENGINE_VARIANT") or "flash"
        if self.variant not in VARIANTS:
            raise SystemExit(f"unknown variant {self.variant!r} (one of {', '.join(VARIANTS)})")
        self.flash = self.variant.startswith("flash")
        self.swa_full = "swafull" in self.variant
        self.unified = "perseq" not in self.variant
        self.rotation = "norot" not in self.variant
        if not self.rotation:
            os.environ["LLAMA_ATTN_ROT_DISABLE"] = "1"  # read by llama_kv_cache's constructor (getenv)
        self.name = (f"llama.cpp (llama-cpp-python {llama_cpp.__version__}, CPU, gemma2 graph, "
                     f"flash_attn {'on' if self.flash else 'off'}, swa_full {'on' if self.swa_full else 'off'}, "
                     f"kv_unified {'on' if self.unified else 'off'}" + ("" if self.rotation else ", LLAMA_ATTN_ROT_DISABLE=1") + ")")
        self.tmp = tempfile.mkdtemp(prefix="ringkv-llamacpp-")
        self.m = None

    def capabilities(self):
        return {"k_dtypes": ["f32", "f16", "bf16", "int8"], "v_dtypes": ["f32", "f16", "bf16", "int8"],
                "int8_schemes": ["q8_0"], "int8_roundings": ["away", "rne"], "rope_styles": ["neox"],
                "rope_scalings": ["none", "linear", "ntk"], "sinks": False, "sink_logits": False, "softcap": True,
                "per_layer_rope": True, "partial_rotary": True, "settable_p0": True, "kv_formats_differ": True,
                "max_sliding_windows": 1, "min_window": 1, "rollback": True, "max_rollback_reserve": 2 ** 30,
                "profile": BASE}

    def unsupported(self, case):
        kt, vt = cache_type(case.k_format), cache_type(case.v_format)
        if kt is None or vt is None:
            return f"K {case.k_format} / V {case.v_format}: no such llama.cpp cache type"
        if self.rotation and "q8_0" in (kt, vt) and case.D % 64 == 0:
            return ROTATION.format(D=case.D)
        if vt == "q8_0" and not self.flash:
            return "V q8_0 without flash attention: llama.cpp requires flash attention for a quantized V cache"
        if abs(case.scale - 1.0 / np.sqrt(case.D)) > 1e-12 * case.scale:
            return f"softmax scale {case.scale}: gemma2 scales q by 1/sqrtf(head_dim)"
        if any(l["sinks"] for l in case.layers):
            return "sink tokens: llama.cpp has no attention sink tokens"
        if len({l["window"] for l in case.layers if l["window"] < case.max_tokens}) > 1:
            return "several sliding windows: a llama.cpp model has one n_swa"
        if any(l["rope"]["style"] != "neox" for l in case.layers):
            return "RoPE other than neox: gemma2's RoPE is NEOX"
        n, _ = M.hidden_layout(case)
        if n > M.MAX_HIDDEN:
            return f"a token's q, k and v have a sum of squares needing a generated hidden size of {n} > " \
                   f"{M.MAX_HIDDEN} (model.py: the RMS-norm padding); the adapter's limit, not llama.cpp's"
        if M.rope_params(case) is None:
            return "per-layer RoPE beyond one theta for sliding and one for full layers (rope.freq_base_swa), " \
                   "or rotary dims / scalings differing per layer"
        return None

    def profile(self, case):
        return profile_for(case.k_dtype, case.v_dtype, self.flash)

    def start(self, case):
        if self.m is not None:
            self.m.close()
            self.m = None
        self.case = case
        path = os.path.join(self.tmp, "model.gguf")
        n, per = M.write_gguf(case, path, window_bug=1 if self.bug == "window+1" else 0)
        self.idc = case.L * per
        most = max(sum(c.n for c in s.chunks) for s in case.steps if s.chunks)
        n_batch = max(32, most)
        n_ctx = 256 * ((case.max_tokens * case.B + 255) // 256)
        self.m = M.LlamaCppModel(path, case.L, n_ctx=n_ctx, n_batch=n_batch, n_seq=case.B,
                                 type_k=cache_type(case.k_format), type_v=cache_type(case.v_format), flash=self.flash,
                                 swa_full=self.swa_full, unified=self.unified,
                                 extra=[f"{t}-{l}" for l in range(case.L) for t in ("Qcur", "Kcur")])
        self.p0 = list(case.start_positions)
        self.held = [0] * case.B
        self.diverged = set()
        self.window = min(l["window"] for l in case.layers)

    def reset(self, seq, p0):
        if not self.m.seq_rm(seq, -1, -1):
            raise RuntimeError(f"llama_memory_seq_rm({seq}, -1, -1) returned false")
        self.p0[seq], self.held[seq] = p0, 0
        self.diverged.discard(seq)

    def rollback(self, rollbacks):
        before = {s: self.m.seq_pos_max(s) for s, _ in rollbacks}
        for seq, n in rollbacks:
            if seq in self.diverged:
                continue
            keep = self.held[seq] - n
            if not self.m.seq_rm(seq, self.p0[seq] + keep, -1):
                if any(self.m.seq_pos_max(s) != before[s] for s, _ in rollbacks):
                    raise RuntimeError(f"llama_memory_seq_rm({seq}, {self.p0[seq] + keep}, -1) returned false "
                                       "after changing the cache")
                raise Refused(f"llama_memory_seq_rm({seq}, {self.p0[seq] + keep}, -1) returned false")
            self.held[seq] = keep

    def append(self, chunks):
        case = self.case
        tokens, positions, seqs = [], [], []
        for c in chunks:
            pos = self.p0[c.seq] + self.held[c.seq] + np.arange(c.n)
            if c.seq in self.diverged or not np.array_equal(pos, c.positions):
                # llama.cpp honoured a rollback the spec refuses (seq_rm never returns false): the case goes
                # on from the unrolled-back state, which llama.cpp no longer has. This sequence's later
                # outputs stay NaN (ringkv check fails them, and reports the refused step honoured).
                if c.seq not in self.diverged:
                    print(f"{case.name}: step {c.step} sequence {c.seq}: the case continues at position "
                          f"{int(c.positions[0])}, llama.cpp holds the sequence up to {int(pos[0]) - 1} "
                          "(a rollback the spec refuses was honoured): its outputs from here are NaN", file=sys.stderr)
                self.diverged.add(c.seq)
                continue
            tokens += list(range(c.b, c.b + c.n))
            if self.bug == "rope-from-slot":
                pos = pos % self.window
            positions += list(pos)
            seqs += [c.seq] * c.n
            self.held[c.seq] += c.n
        try:
            ubatches = self.m.decode(tokens, positions, seqs) if tokens else []
        except RuntimeError as e:
            # llama_decode refused the batch (llama.cpp's message is on stderr): e.g. after a reset of a
            # sequence holding position 2^31 - 1, which llama_memory_seq_rm(seq, -1, -1) does not remove
            # (p1 = -1 becomes INT32_MAX, an exclusive bound). The step's outputs stay NaN.
            print(f"{case.name}: step {chunks[0].step}: {e}: the outputs of these sequences from here are NaN",
                  file=sys.stderr)
            self.diverged.update(c.seq for c in chunks)
            ubatches = []
        out = np.full((case.R, case.L, case.Hq * case.D), np.nan, np.float32)
        q_rot = np.full((case.R, case.L, case.Hq * case.D), np.nan, np.float32)
        k_rot = np.full((case.R, case.L, case.Hkv * case.D), np.nan, np.float32)
        for u in ubatches:
            ids = np.rint(u["attn_norm-0"][:, self.idc] / M.ID_SCALE).astype(np.int64) - 1
            for l in range(case.L):
                out[ids, l] = u[f"kqv_out-{l}"]
                # llama.cpp's rotated q and k (ggml_rope_ext outputs; Qcur-l is named before gemma2's scale)
                q_rot[ids, l] = u[f"Qcur-{l}"].reshape(len(ids), -1)
                k_rot[ids, l] = u[f"Kcur-{l}"].reshape(len(ids), -1)

        def per_chunk(a, c, H):
            return a[c.rows].transpose(1, 0, 2).reshape(case.L, c.n, H, case.D)
        return [{"out": per_chunk(out, c, case.Hq), "q_rot": per_chunk(q_rot, c, case.Hq),
                 "k_rot": per_chunk(k_rot, c, case.Hkv)} for c in chunks]


if __name__ == "__main__":
    main(LlamaCpp, __doc__, BUGS)
