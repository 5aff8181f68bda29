#!/usr/bin/env python3
"""ringkv adapter for ONNX Runtime's GroupQueryAttention (domain com.microsoft) on the CPU execution provider.

    adapter.py GOLDEN_DIR OUT_DIR [--ringkv RINGKV] [--filter REGEX] [--bug window+1|rope-from-slot]
    ringkv check --outputs OUT_DIR --golden GOLDEN_DIR

Each layer of a case is one single-node ONNX model built with onnx.helper, run step by step as a
server runs it: every step's appending sequences form one batch (right-padded to the longest chunk,
`query_seqlens` giving each row's chunk length), the past K/V of each sequence is the `present`
the previous call returned for it (the whole history: past and present are not windowed),
`seqlens_k` is each row's total length - 1 and `total_sequence_length` past + chunk. A reset gives
the sequence a fresh, empty past. RoPE is the operator's own (`do_rotary`, `rotary_interleaved` for
gptj) from cos/sin caches computed as a Hugging Face model computes them (inv_freq, positions and
angles in f32; linear scaling divides the positions, NTK scales theta), with `position_ids` carrying
the true positions (start positions and resets). The window is `local_window_size`; the softmax
scale `scale`, softcap `softcap`, learned sink logits `head_sink`; spec §10's static INT8 is an int8
cache with `k_scale`/`v_scale` and quant type PER_TENSOR.

Window convention (found by running the engine: engines/onnxruntime/convention_test.py):
`local_window_size = W` makes each query see W keys *including its own*, exactly spec §2's W, so the
adapter passes W unchanged (W = 1: only the query's own key). A layer whose window never slides
(W >= max_tokens) gets local_window_size = -1 (full causal attention).

Not expressible, declared in capabilities.json or per case as unsupported, never emulated here:
sink tokens (StreamingLLM: the operator has no kept prefix), INT8 per_head and q8_0 (its INT8 scales
are given per tensor or channel, not computed per token), INT8 rounding half away (it rounds half to
even), bf16 and fp8 caches (no CPU kernel: "Could not find an implementation"), K and V in
different dtypes (one type T), head dims not a multiple of 8 (16 with do_rotary), rotary dims whose half is not a multiple of 8 ("cos_cache dimension 1 must be <=
head_size / 2 and a multiple of 8"), positions beyond the 2^17-row cos/sin cache. The messages in
quotes are the engine's own, from running it (docs/engines.md).
"""
import functools
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

# The ringkv package of this repository (python/src), ahead of any installed copy.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "src"))
from ringkv.adapter import main  # noqa: E402

# Set explicitly: onnx's helper writes its own newest IR version (14 with onnx 1.23), which older
# onnxruntime releases reject (1.31 reads at most 13). IR 10 is the version of the default opset 21
# the model imports; onnxruntime 1.32 reads 10 to 14 (tried).
IR_VERSION = 10
NAME = f"onnxruntime-{ort.__version__} GroupQueryAttention (CPU)"
ELEM = {"f32": TensorProto.FLOAT, "f16": TensorProto.FLOAT16, "int8": TensorProto.INT8}
NP = {"f32": np.float32, "f16": np.float16, "int8": np.int8}
# The cos/sin caches hold 2^17 rows, as a model exported for a 128K context ships them (Llama 3,
# Phi-3 128K): positions beyond are outside the capabilities. (Tables for 2^20 positions work too, but
# cost 0.5 GB per table at head dim 128, too much for every CI run.)
MAX_POSITION = (1 << 17) - 1
MAX_BATCH = 64

# The profile this engine honestly has (profiles/f32-rope-angles.json): f32 attention on the CPU,
# RoPE from cos/sin tables built in f32. With f16 K/V the model runs in f16 (T = float16): q, the
# cos/sin tables and the output are f16. P is declared f16 too, as the kernel's P.V takes V in T (not
# read in its source: were P kept in f32, this declaration would only be looser); the sums f32.
PROFILE_F32 = {"q_dot": "f32", "q_quant": "none", "k_storage": "as_configured", "v_storage": "as_configured",
               "qk_accumulator": "f32", "pv_accumulator": "f32", "p_before_pv": "f32", "output": "f32",
               "rope_angle": "f32"}
PROFILE_F16 = dict(PROFILE_F32, q_dot="f16", p_before_pv="f16", output="f16", rope_angle="f16")

BUGS = {"window+1": "local_window_size = W + 1 (one key too many)",
        "rope-from-slot": "position_ids from the ring slot (index mod W) instead of the true position"}


def rope_tables(rope, head_dim, n_positions, dtype):
    """cos/sin caches of at least n_positions rows, [rows][R/2], as a Hugging Face model computes them:
    all in f32. Rows are rounded up to a power of two and the last few tables kept, so that cases
    with the same RoPE share one table (a model builds its table once, for its maximum position)."""
    rows = 1 << max(10, (n_positions - 1).bit_length())
    return _rope_tables(tuple(sorted(rope.items())), head_dim, rows, np.dtype(dtype).name)


@functools.lru_cache(maxsize=4)
def _rope_tables(rope_items, head_dim, n_positions, dtype):
    rope = dict(rope_items)
    R = rope["rotary_dim"] or head_dim
    theta = np.float32(rope["theta"])
    if rope["scaling"] == "ntk":
        theta = np.float32(theta * np.float32(rope["factor"]) ** np.float32(R / (R - 2)))
    inv_freq = (np.float32(1.0) / theta ** (np.arange(0, R, 2, dtype=np.float32) / np.float32(R))).astype(np.float32)
    t = np.arange(n_positions, dtype=np.float32)
    if rope["scaling"] == "linear":
        t = t / np.float32(rope["factor"])
    freqs = np.outer(t, inv_freq).astype(np.float32)
    return np.cos(freqs).astype(dtype), np.sin(freqs).astype(dtype)


def gqa_model(case, layer, dtype, window, sink_logits, cache="same"):
    """The one-node model of one layer: activations of `dtype`, the cache of `dtype` too, or of "int8"
    (spec §10's static INT8: one f32 scale per tensor, kv_cache_bit_width 8, quant type PER_TENSOR)."""
    rope = case.layers[layer]["rope"]
    T = ELEM[dtype]
    TC = ELEM[dtype if cache == "same" else cache]
    inputs = ["query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length"]
    graph_inputs = [
        helper.make_tensor_value_info("query", T, ["B", "S", case.Hq * case.D]),
        helper.make_tensor_value_info("key", T, ["B", "S", case.Hkv * case.D]),
        helper.make_tensor_value_info("value", T, ["B", "S", case.Hkv * case.D]),
        helper.make_tensor_value_info("past_key", TC, ["B", case.Hkv, "P", case.D]),
        helper.make_tensor_value_info("past_value", TC, ["B", case.Hkv, "P", case.D]),
        helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, ["B"]),
        helper.make_tensor_value_info("total_sequence_length", TensorProto.INT32, []),
    ]
    rotary = rope["style"] != "none"
    if rotary:
        R2 = (rope["rotary_dim"] or case.D) // 2
        inputs += ["cos_cache", "sin_cache", "position_ids"]
        graph_inputs += [helper.make_tensor_value_info("cos_cache", T, ["M", R2]),
                         helper.make_tensor_value_info("sin_cache", T, ["M", R2]),
                         helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["B", "S"])]
    else:
        inputs += ["", "", ""]
    inputs += [""]  # attention_bias
    if sink_logits:
        inputs += ["head_sink"]
        graph_inputs += [helper.make_tensor_value_info("head_sink", T, [case.Hq])]
    else:
        inputs += [""]
    if cache == "int8":
        inputs += ["k_scale", "v_scale"]
        graph_inputs += [helper.make_tensor_value_info("k_scale", TensorProto.FLOAT, [1]),
                         helper.make_tensor_value_info("v_scale", TensorProto.FLOAT, [1])]
    else:
        inputs += ["", ""]
    inputs += ["", "", "query_seqlens"]  # q_norm_weight, k_norm_weight
    graph_inputs += [helper.make_tensor_value_info("query_seqlens", TensorProto.INT32, ["B"])]
    attrs = dict(num_heads=case.Hq, kv_num_heads=case.Hkv, local_window_size=window, scale=float(case.scale),
                 do_rotary=int(rotary), rotary_interleaved=int(rope["style"] == "gptj"))
    if case.softcap:
        attrs["softcap"] = float(case.softcap)
    if cache == "int8":
        attrs.update(k_quant_type="PER_TENSOR", v_quant_type="PER_TENSOR", kv_cache_bit_width=8)
    node = helper.make_node("GroupQueryAttention", inputs, ["output", "present_key", "present_value"],
                            domain="com.microsoft", **attrs)
    outputs = [helper.make_tensor_value_info("output", T, ["B", "S", case.Hq * case.D]),
               helper.make_tensor_value_info("present_key", TC, ["B", case.Hkv, "P2", case.D]),
               helper.make_tensor_value_info("present_value", TC, ["B", case.Hkv, "P2", case.D])]
    graph = helper.make_graph([node], "gqa_layer", graph_inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = IR_VERSION
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


class OnnxRuntimeGqa:
    name = NAME

    def capabilities(self):
        return {"k_dtypes": ["f32", "f16", "int8"], "v_dtypes": ["f32", "f16", "int8"], "int8_schemes": ["static"],
                "int8_roundings": ["rne"],
                "rope_styles": ["none", "neox", "gptj"], "rope_scalings": ["none", "linear", "ntk"],
                "head_dims": [16, 32, 48, 64, 80, 96, 112, 128, 256], "sinks": False, "sink_logits": True,
                "softcap": True, "per_layer_rope": True, "partial_rotary": True, "settable_p0": True,
                "min_window": 1, "max_batch": MAX_BATCH, "max_position": MAX_POSITION, "profile": PROFILE_F32}

    def unsupported(self, case):
        if case.k_dtype != case.v_dtype:
            return f"K {case.k_dtype} and V {case.v_dtype}: GroupQueryAttention has one type T for both"
        if case.k_dtype not in ELEM:
            return f"K/V {case.k_dtype}: no such cache type in GroupQueryAttention's CPU kernel"
        if case.k_dtype == "int8":
            for kv in ("k", "v"):
                f = case.config[kv + "_format"]
                if f["int8_scheme"] != "static" or f["rounding"] != "rne":
                    return (f"{kv.upper()} int8 {f['int8_scheme']} {f['rounding']}: the CPU kernel quantises with one "
                            "scale per tensor or per channel, given, rounding half to even")
        if case.D % 8:
            return f"head_dim {case.D}: the CPU kernel needs a multiple of 8"
        for l, layer in enumerate(case.layers):
            if layer["rope"]["style"] != "none" and case.D % 16:
                return f"head_dim {case.D}: the CPU kernel with do_rotary needs a multiple of 16"
            if layer["sinks"]:
                return f"layer {l}: {layer['sinks']} sink tokens (GroupQueryAttention has no kept prefix)"
            R = layer["rope"]["rotary_dim"] or case.D
            if layer["rope"]["style"] != "none" and (R // 2) % 8:
                return f"layer {l}: rotary_dim {R}: the cos/sin cache width R/2 must be a multiple of 8"
        if case.max_position() > MAX_POSITION:
            return f"position {case.max_position()} > {MAX_POSITION}, the cos/sin cache"
        if case.B > MAX_BATCH:
            return f"batch {case.B} > {MAX_BATCH}"
        return None

    def profile(self, case):
        return PROFILE_F16 if case.k_dtype == "f16" else PROFILE_F32

    def __init__(self, bug=None):
        self.bug = bug

    def start(self, case):
        """One single-node model per layer, its cos/sin tables, and an empty past per sequence."""
        dtype = "f32" if case.k_dtype == "int8" else case.k_dtype  # the model's activations
        cache = case.k_dtype
        self.case, self.T, self.TC = case, NP[dtype], NP[cache]
        self.scales = {}
        if cache == "int8":  # the static scales of spec §10: code = round(x / s), value = code * s
            self.scales = {kv: np.float32(case.config[kv + "_format"]["scale"]) for kv in ("k", "v")}
        self.layers = []
        for l, layer in enumerate(case.layers):
            window = layer["window"] if case.is_sliding(l) else -1
            if self.bug == "window+1" and window > 0:
                window += 1
            sinks = np.asarray(case.sink_logits[l], self.T) if case.sink_logits else None
            session = gqa_model(case, l, dtype, window, sinks is not None, cache if cache == "int8" else "same")
            feeds_rope = {}
            if layer["rope"]["style"] != "none":
                cos, sin = rope_tables(layer["rope"], case.D, case.max_position() + 1, self.T)
                feeds_rope = {"cos_cache": cos, "sin_cache": sin}
            self.layers.append((session, sinks, feeds_rope))
        # per layer: sequence -> (past K [Hkv][n][D], past V [Hkv][n][D]): its last `present`
        self.history = [{} for _ in case.layers]

    def reset(self, seq, p0):
        for history in self.history:
            history.pop(seq, None)

    def append(self, chunks):
        """One step: per layer, every appending sequence in one batch (right-padded to the longest chunk)."""
        case, T, TC, scales = self.case, self.T, self.TC, self.scales
        results = []
        for c in chunks:
            shape_k = (case.L, c.n, case.Hkv, case.D)
            r = {"out": np.zeros((case.L, c.n, case.Hq, case.D), np.float32),
                 "k_stored": np.zeros(shape_k, np.float32), "v_stored": np.zeros(shape_k, np.float32)}
            if scales:
                r.update(k_codes=np.zeros(shape_k, np.int8), v_codes=np.zeros(shape_k, np.int8))
            results.append(r)
        for l, layer in enumerate(case.layers):
            session, sinks, feeds_rope = self.layers[l]
            history = self.history[l]
            for c in chunks:
                if c.index == 0:  # a new or reset sequence: a fresh, empty past
                    history[c.seq] = (np.zeros((case.Hkv, 0, case.D), TC), np.zeros((case.Hkv, 0, case.D), TC))
            Bn, S = len(chunks), max(c.n for c in chunks)
            P = max(history[c.seq][0].shape[1] for c in chunks)
            q = np.zeros((Bn, S, case.Hq * case.D), T)
            k = np.zeros((Bn, S, case.Hkv * case.D), T)
            v = np.zeros((Bn, S, case.Hkv * case.D), T)
            past_k = np.zeros((Bn, case.Hkv, P, case.D), TC)
            past_v = np.zeros((Bn, case.Hkv, P, case.D), TC)
            pos = np.zeros((Bn, S), np.int64)
            seqlens = np.zeros(Bn, np.int32)
            qlens = np.zeros(Bn, np.int32)
            for i, c in enumerate(chunks):
                hk, hv = history[c.seq]
                n_past = hk.shape[1]
                q[i, :c.n] = c.q[l].reshape(c.n, -1)
                k[i, :c.n] = c.k[l].reshape(c.n, -1)
                v[i, :c.n] = c.v[l].reshape(c.n, -1)
                past_k[i, :, :n_past], past_v[i, :, :n_past] = hk, hv
                index = c.index + np.arange(S)
                if self.bug == "rope-from-slot" and case.is_sliding(l):
                    index = index % layer["window"]
                pos[i] = c.position - c.index + index
                seqlens[i] = n_past + c.n - 1
                qlens[i] = c.n
            feeds = {"query": q, "key": k, "value": v, "past_key": past_k, "past_value": past_v,
                     "seqlens_k": seqlens, "total_sequence_length": np.array(P + S, np.int32),
                     # with query_seqlens an upper bound; it must cover the padded buffer P + S, not
                     # only the longest row (else: "the padded chunk ... does not fit in the KV cache capacity")
                     "query_seqlens": qlens}
            if feeds_rope:
                feeds.update(feeds_rope, position_ids=pos)
            if sinks is not None:
                feeds["head_sink"] = sinks
            if scales:
                feeds.update(k_scale=np.array([scales["k"]]), v_scale=np.array([scales["v"]]))
            o, present_k, present_v = session.run(None, feeds)
            for i, c in enumerate(chunks):
                n_total = int(seqlens[i]) + 1
                history[c.seq] = (present_k[i, :, :n_total].copy(), present_v[i, :, :n_total].copy())
                results[i]["out"][l] = o[i, :c.n].astype(np.float32).reshape(c.n, case.Hq, case.D)
                # The stored cache of the new rows: what `present` holds for them (INT8: codes, decoded).
                for kv, present in (("k", present_k), ("v", present_v)):
                    held = present[i, :, n_total - c.n:n_total].transpose(1, 0, 2)
                    if scales:
                        results[i][kv + "_codes"][l] = held
                        results[i][kv + "_stored"][l] = held.astype(np.float32) * scales[kv]
                    else:
                        results[i][kv + "_stored"][l] = held.astype(np.float32)
        return results


if __name__ == "__main__":
    main(OnnxRuntimeGqa, __doc__, BUGS)
