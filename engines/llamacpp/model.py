"""A generated Gemma 2 GGUF model per golden case, and llama.cpp driven through its C API (llama_cpp ctypes).

Architecture: llama.cpp's `gemma2` (src/models/gemma2.cpp): interleaved sliding-window attention with
the KV cache `llama_kv_cache_iswa` (a cache for the sliding layers, one for the others), swa_type
STANDARD (masked iff p_query - p_key >= n_swa), the per-layer pattern read from the GGUF array
`gemma2.attention.sliding_window_pattern` (one bool per layer), `sliding_window` = n_swa, RoPE NEOX
(gemma2's rope type) with `rope.freq_base` for full layers and `rope.freq_base_swa` for sliding ones,
`rope.dimension_count` (partial rotary), linear scaling (`rope.scaling.type linear`), attention logit
softcapping (gemma2 always caps; a case without softcap gets cap 2^100, under which
cap * tanh(s / cap) == s exactly: s / 2^100 and * 2^100 are exact and tanhf(y) == y for |y| < 2^-12),
Q scaled by f_attention_scale = 1/sqrtf(head_dim) before attention (so only softmax_scale = 1/sqrt(D)).

Construction (every step exact; proven by construction_test.py with numpy and by reading the graph):
- hidden size n = 4^k (so gemma2's input scaling by sqrtf(n) = 2^k is exact); the embedding row of a
  token is x = [q_0 k_0 v_0 | q_1 k_1 v_1 | ... | id | pad_1 .. pad_P | 0 ...]: the case's raw q, k and
  v of every layer for that golden row, id = (row + 1) / 2^20 (which row it is; read back from the
  graph to map llama.cpp's ubatch order to rows), and P padding values chosen so that ggml's RMS norm
  (ggml-cpu ops.cpp ggml_compute_forward_rms_norm_f32: f32 squares summed in double,
  mean = (float)(sum / n), scale = 1.0f / sqrtf(mean + eps)) computes scale == 2^-k exactly for
  c * x, c = 2^k; eps = 2^-100, which vanishes against mean = 4^k. The norm output is then x exactly
  and the norm weights are 1.
- q_proj, k_proj, v_proj of layer l are f32 0/1 selection matrices (one 1 per row): each element is
  x * 1 plus zeros, exact in f32 (weights f32, so ggml's vec_dot type is f32 and x is not rounded).
  No biases.
- o_proj = 0, FFN weights 0: the attention adds 0 to the residual (post-attention RMS norm of 0 is 0
  with eps > 0), the FFN adds 0, so every layer sees the same x and gets exactly its q, k and v.
- the attention output of layer l is read from the graph: the tensor `kqv_out-l` (llama-graph.cpp
  build_attn: the output of build_attn_mha before wo) through the context's eval callback (cb_eval, as
  llama.cpp's llama-eval-callback tool reads tensors), together with `attn_norm-0` (which row each
  ubatch column is: the id element). Nothing is recomputed: the values are llama.cpp's.
- the vocabulary has one row per golden row (token id = row); no tokenizer (`no_vocab`).

Residual error of the construction: none for q, k and v (exact, checked); the Q scale is f32
1/sqrtf(D) multiplied into rotated q in f32 (one f32 rounding, inside the declared profile's q_dot).
"""
import ctypes
import math
import os
import sys

import numpy as np
import gguf
import llama_cpp as lc

ID_SCALE = 2.0 ** -20
MAX_HIDDEN = 2 ** 16  # the padding needs n >= 2 * (largest sum of squares of a token's q, k, v + 1)
PAD = 8
EPS = 2.0 ** -100
NO_CAP = 2.0 ** 100
GGML_TYPES = {"f32": 0, "f16": 1, "q8_0": 8, "bf16": 30}


def hidden_layout(case):
    per = (case.Hq + 2 * case.Hkv) * case.D
    used = case.L * per + 1 + PAD
    rows = np.concatenate([case.tensors[t].transpose(1, 0, 2, 3).reshape(case.R, case.L, -1)
                           for t in ("q", "k", "v")], axis=2)  # [R][L][(Hq+2Hkv)D] per layer q|k|v
    x = np.zeros((case.R, used), np.float32)
    x[:, :case.L * per] = rows.reshape(case.R, -1)
    sq = (x.astype(np.float64) ** 2).sum(1).max()
    n = 4
    while n < used or n < 2 * (sq + 1):
        n *= 4
    return n, per


def rms_scale_ggml(y):
    """ggml_compute_forward_rms_norm_f32's scale for one row y (f32): sum of f32 squares in double."""
    s = float(np.sum((y * y).astype(np.float32).astype(np.float64)))
    mean = np.float32(s / y.shape[0])
    return np.float32(1.0) / np.sqrt(np.float32(mean + np.float32(EPS)), dtype=np.float32)


def embeddings(case):
    """The token embedding table [R][n] (module docstring), each row checked: ggml's RMS norm of
    sqrtf(n) * row returns the row exactly."""
    n, per = hidden_layout(case)
    c = np.float32(math.sqrt(n))
    E = np.zeros((case.R, n), np.float32)
    q, k, v = (case.tensors[t] for t in ("q", "k", "v"))
    for l in range(case.L):
        o = l * per
        E[:, o:o + case.Hq * case.D] = q[l].reshape(case.R, -1)
        E[:, o + case.Hq * case.D:o + (case.Hq + case.Hkv) * case.D] = k[l].reshape(case.R, -1)
        E[:, o + (case.Hq + case.Hkv) * case.D:o + per] = v[l].reshape(case.R, -1)
    idc = case.L * per
    E[:, idc] = (np.arange(case.R, dtype=np.float32) + 1) * np.float32(ID_SCALE)
    for r in range(case.R):
        row = E[r]
        deficit = n - float(np.sum(row.astype(np.float64) ** 2))
        row[idc + 1:idc + 1 + PAD] = np.float32(math.sqrt(deficit / PAD))
        for _ in range(200):  # nudge the last pad value by ulps until ggml's norm scale is 1/c exactly
            y = row * c
            s = float(np.sum((y * y).astype(np.float32).astype(np.float64)))
            mean = np.float32(s / n)
            if mean == np.float32(n):
                break
            row[idc + PAD] = np.nextafter(row[idc + PAD], np.float32(np.inf if mean < n else -np.inf), dtype=np.float32)
        scale = rms_scale_ggml(row * c)
        if scale != np.float32(1.0) / c or not np.array_equal((row * c) * scale, row):
            raise RuntimeError(f"row {r}: ggml's RMS norm would not return the row exactly (scale {scale})")
    return E


def sliding_pattern(case):
    """Which layers are gemma2 SWA layers: those whose window slides (W < max_tokens). gemma2's cache
    (llama_kv_cache_iswa) requires at least one: a case where no window slides makes every layer an
    SWA layer with n_swa = the smallest W (>= max_tokens: plain causal attention, spec §2)."""
    sl = [case.is_sliding(l) for l in range(case.L)]
    return sl if any(sl) else [True] * case.L


def rope_params(case):  # noqa: C901
    """(freq_base, freq_base_swa, freq_scale, n_rot) of the model: gemma2 has one theta for full and one
    for sliding layers, one linear factor and one rotary dim. None when the case needs more."""
    sl = sliding_pattern(case)
    groups = {}
    for l, lay in enumerate(case.layers):
        rp = lay["rope"]
        theta = float(rp["theta"])
        if rp["scaling"] == "ntk":  # the static NTK-aware base, a model constant (as converters write it)
            d = rp["rotary_dim"] or case.D
            theta = theta * float(rp["factor"]) ** (d / (d - 2))
        groups.setdefault(sl[l], set()).add(theta)
    if any(len(g) > 1 for g in groups.values()):
        return None
    scal = {(lay["rope"]["scaling"], lay["rope"].get("factor")) for lay in case.layers}
    rots = {lay["rope"]["rotary_dim"] or case.D for lay in case.layers}
    if len(scal) > 1 or len(rots) > 1:
        return None
    (kind, factor), = scal
    base_full = next(iter(groups.get(False, groups.get(True))))
    base_swa = next(iter(groups.get(True, groups.get(False))))
    return base_full, base_swa, (1.0 / float(factor) if kind == "linear" else 1.0), rots.pop()


def write_gguf(case, path, window_bug=0):
    """Writes the case's Gemma 2 model to `path` (module docstring). window_bug: added to n_swa (planted bug)."""
    n, per = hidden_layout(case)
    E = embeddings(case)
    base_full, base_swa, fscale, n_rot = rope_params(case)
    sl = sliding_pattern(case)
    n_swa = min(case.layers[l]["window"] for l in range(case.L) if sl[l]) + window_bug
    w = gguf.GGUFWriter(path, "gemma2")
    w.add_block_count(case.L)
    w.add_context_length(max(4096, case.max_tokens))
    w.add_embedding_length(n)
    n_ff = 16
    w.add_feed_forward_length(n_ff)
    w.add_head_count(case.Hq)
    w.add_head_count_kv(case.Hkv)
    w.add_key_length(case.D)
    w.add_value_length(case.D)
    w.add_layer_norm_rms_eps(EPS)
    w.add_rope_freq_base(base_full)
    w.add_rope_freq_base_swa(base_swa)
    w.add_rope_dimension_count(n_rot)
    if fscale != 1.0:
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(1.0 / fscale)
    w.add_sliding_window(n_swa)
    w.add_array("gemma2.attention.sliding_window_pattern", sl)
    w.add_attn_logit_softcapping(float(case.softcap) if case.softcap else NO_CAP)
    w.add_final_logit_softcapping(NO_CAP)
    w.add_tokenizer_model("no_vocab")
    w.add_vocab_size(case.R)
    w.add_tensor("token_embd.weight", E)
    w.add_tensor("output_norm.weight", np.ones(n, np.float32))
    def sel(lo, hi):  # rows lo..hi-1 of the n x n identity
        a = np.zeros((hi - lo, n), np.float32)
        a[np.arange(hi - lo), np.arange(lo, hi)] = 1
        return a
    for l in range(case.L):
        o = l * per
        qd, kd = case.Hq * case.D, case.Hkv * case.D
        w.add_tensor(f"blk.{l}.attn_norm.weight", np.ones(n, np.float32))
        w.add_tensor(f"blk.{l}.attn_q.weight", sel(o, o + qd))
        w.add_tensor(f"blk.{l}.attn_k.weight", sel(o + qd, o + qd + kd))
        w.add_tensor(f"blk.{l}.attn_v.weight", sel(o + qd + kd, o + per))
        w.add_tensor(f"blk.{l}.attn_output.weight", np.zeros((n, qd), np.float32))
        w.add_tensor(f"blk.{l}.post_attention_norm.weight", np.ones(n, np.float32))
        w.add_tensor(f"blk.{l}.ffn_norm.weight", np.ones(n, np.float32))
        w.add_tensor(f"blk.{l}.ffn_gate.weight", np.zeros((n_ff, n), np.float32))
        w.add_tensor(f"blk.{l}.ffn_up.weight", np.zeros((n_ff, n), np.float32))
        w.add_tensor(f"blk.{l}.ffn_down.weight", np.zeros((n, n_ff), np.float32))
        w.add_tensor(f"blk.{l}.post_ffw_norm.weight", np.ones(n, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return n, per


# --- reading graph tensors through cb_eval ---------------------------------------------------------------

class GgmlTensor(ctypes.Structure):
    """struct ggml_tensor of the vendored ggml (ggml/include/ggml.h), up to name."""
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4),
                ("nb", ctypes.c_size_t * 4), ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * 16),
                ("flags", ctypes.c_int32), ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p),
                ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p), ("name", ctypes.c_char * 64)]


def read_f32_2d(t):
    """A 2-d (or reshaped 4-d) f32 tensor as numpy [ne1*ne2*ne3][ne0], honouring strides."""
    if t.type != 0:
        raise RuntimeError(f"tensor {t.name.decode()} has ggml type {t.type}, not f32")
    ne, nb = list(t.ne), list(t.nb)
    out = np.empty((ne[3], ne[2], ne[1], ne[0]), np.float32)
    base = t.data
    for i3 in range(ne[3]):
        for i2 in range(ne[2]):
            for i1 in range(ne[1]):
                addr = base + i1 * nb[1] + i2 * nb[2] + i3 * nb[3]
                if nb[0] == 4:
                    out[i3, i2, i1] = np.ctypeslib.as_array((ctypes.c_float * ne[0]).from_address(addr))
                else:
                    for i0 in range(ne[0]):
                        out[i3, i2, i1, i0] = ctypes.c_float.from_address(addr + i0 * nb[0]).value
    return out.reshape(-1, ne[0])


class Capture:
    """The eval callback: per ubatch, attn_norm-0 (rows) and kqv_out-l (attention output) of every layer."""

    def __init__(self, L, extra=()):
        self.L, self.extra = L, set(extra)
        self.names = {b"attn_norm-0"} | {f"kqv_out-{l}".encode() for l in range(L)} | {e.encode() for e in extra}
        self.ubatches = []
        self.cfunc = lc.ggml_backend_sched_eval_callback(self._cb)

    def _cb(self, tensor, ask, user_data):
        t = ctypes.cast(tensor, ctypes.POINTER(GgmlTensor)).contents
        name = t.name
        if ask:
            return name in self.names
        if name == b"attn_norm-0":
            self.ubatches.append({})
        self.ubatches[-1][name.decode()] = read_f32_2d(t)
        return True


@lc.llama_log_callback
def _quiet(level, text, user_data):
    if level >= 4 or os.environ.get("RINGKV_LLAMA_LOG"):  # GGML_LOG_LEVEL_ERROR = 4
        sys.stderr.write(text.decode(errors="replace"))


lc.llama_log_set(_quiet, None)


@lc.llama_progress_callback
def _no_progress(progress, user_data):  # llama.cpp's default prints a dot per step of loading
    return True


class LlamaCppModel:
    """A loaded GGUF and a context (llama_init_from_model) with the given cache parameters."""

    def __init__(self, path, L, n_ctx, n_batch, n_seq, type_k="f16", type_v="f16", flash=False, swa_full=False,
                 unified=True, extra=()):
        lc.llama_backend_init()
        mp = lc.llama_model_default_params()
        mp.use_mmap = False
        mp.progress_callback = _no_progress
        self.model = lc.llama_model_load_from_file(path.encode(), mp)
        if not self.model:
            raise RuntimeError(f"llama_model_load_from_file failed on {path}")
        self.capture = Capture(L, extra)
        cp = lc.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = n_ctx, n_batch, n_batch, n_seq
        cp.n_threads = cp.n_threads_batch = 1
        cp.type_k, cp.type_v = GGML_TYPES[type_k], GGML_TYPES[type_v]
        cp.flash_attn_type = 1 if flash else 0
        cp.swa_full, cp.kv_unified = swa_full, unified
        cp.embeddings = False
        cp.no_perf = True
        cp.cb_eval = self.capture.cfunc
        self.ctx = lc.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError("llama_init_from_model failed (see llama.cpp's log)")
        self.mem = lc.llama_get_memory(self.ctx)
        self.n_batch = n_batch
        self.batch = lc.llama_batch_init(n_batch, 0, 1)

    def decode(self, tokens, positions, seqs):
        """One llama_decode of the tokens; returns {token: per-layer attention output [L][Hq*D]} and the
        captured ubatches."""
        b = self.batch
        b.n_tokens = len(tokens)
        for i, (t, p, s) in enumerate(zip(tokens, positions, seqs)):
            b.token[i], b.pos[i], b.n_seq_id[i] = int(t), int(p), 1
            b.seq_id[i][0] = int(s)
            b.logits[i] = i == len(tokens) - 1
        self.capture.ubatches = []
        rc = lc.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        return self.capture.ubatches

    def seq_rm(self, seq, p0, p1):
        return bool(lc.llama_memory_seq_rm(self.mem, seq, p0, p1))

    def seq_pos_max(self, seq):
        return lc.llama_memory_seq_pos_max(self.mem, seq)

    def close(self):
        lc.llama_batch_free(self.batch)
        lc.llama_free(self.ctx)
        lc.llama_model_free(self.model)
