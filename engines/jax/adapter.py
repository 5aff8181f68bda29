#!/usr/bin/env python3
"""ringkv adapter for JAX: jax.nn.dot_product_attention (implementation "xla", on the CPU).

    adapter.py GOLDEN_DIR OUT_DIR [--ringkv RINGKV] [--filter REGEX] [--bug window+1|rope-from-slot]
    ringkv check --outputs OUT_DIR --golden GOLDEN_DIR

The adapter is a small JAX decoder layer as a model written in JAX has it:
- RoPE in jax.numpy from the true positions (int32, as JAX without x64 keeps them), angles in f32:
  inv_freq = theta^(-2k/R), angle = position * inv_freq, then cos and sin (neox: pairs (k, k + R/2);
  gptj: pairs (2k, 2k + 1); linear scaling divides the position, NTK scales theta);
- the KV cache is a ring of C slots per sequence and layer (C = W for a sliding layer, max_tokens for
  one whose window never slides), token i in slot i mod C, holding the rotated K and V in the
  case's storage dtype (f32 or bf16: f16 below); a reset empties the sequence's ring;
- each chunk (one sequence's tokens of one step) attends over the ring's keys and the chunk's own, in
  one jitted call of jax.nn.dot_product_attention per chunk and layer, with q, K and V in the storage
  dtype (the model's dtype), softmax_scale as `scale`. Shapes are fixed as a JAX server fixes them:
  the chunk padded to a power of two, the keys to C + that, the padding masked by
  `query_seq_lengths` and `key_value_seq_lengths`.

Window convention (found by running the engine: engines/jax/convention_test.py):
`local_window_size = (left, right)` lets query i see keys j with i - left <= j <= i + right, where i
and j are *array indices* aligned at the top left (query 0 with key 0), not positions: over keys of
its own array, `left = W - 1` is spec §2's window of W keys including the query's own. A decode step's
query is not key 0 of its array, and JAX's padding masks cut only the end of the arrays, so the
adapter passes queries and keys newest first (decode_step): query i'' then has its own key at index
i'' and the key d tokens before it at i'' + d, spec §2's window of W keys is exactly
`local_window_size = (0, W - 1)`, and the padding lies at the end, where the lengths mask it. A layer
whose window never slides (W >= max_tokens) gets the same with its W. The planted bug `window+1` is
one key too many there.

Not expressible, declared in capabilities.json or per case as unsupported, never emulated here:
sink tokens and learned sink logits (no such parameter), softcap (no such parameter), INT8 and fp8
caches (no quantised K/V in dot_product_attention), K and V of different dtypes (it needs one dtype).
"""
import functools
import os
import sys

import numpy as np
import jax
import jax.numpy as jnp

# The ringkv package of this repository (python/src), ahead of any installed copy.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "src"))
from ringkv.adapter import main  # noqa: E402

jax.config.update("jax_platforms", "cpu")
if os.environ.get("RINGKV_JAX_CACHE"):  # compiled shapes kept between runs (the ctest points it into the build tree)
    jax.config.update("jax_compilation_cache_dir", os.environ["RINGKV_JAX_CACHE"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
NAME = f"jax-{jax.__version__} dot_product_attention (xla, CPU)"
DTYPES = {"f32": jnp.float32, "bf16": jnp.bfloat16}
# f16: jitted on the CPU, dot_product_attention asks dot_general for DotAlgorithmPreset.F16_F16_F32,
# which XLA's CPU backend rejects ("The precision 'F16_F16_F32' is not supported by dot_general on
# CPU"); only the eager path catches that and falls back. A JAX model is jitted, so f16 is left out.
F16_ERROR = "f16: jitted dot_product_attention on the CPU fails (precision F16_F16_F32 not supported by dot_general)"

# f32 models: f32 everywhere, RoPE angles in f32 (profiles/f32-rope-angles.json). bf16 models:
# q, K and V in that dtype, logits f32 (preferred_element_type), softmax in f32, P cast to the K/V
# dtype before P.V, the output in that dtype (jax/_src/nn/functions.py _dot_product_attention_core).
PROFILE_F32 = {"q_dot": "f32", "q_quant": "none", "k_storage": "as_configured", "v_storage": "as_configured",
               "qk_accumulator": "f32", "pv_accumulator": "f32", "p_before_pv": "f32", "output": "f32",
               "rope_angle": "f32"}
PROFILE_BF16 = dict(PROFILE_F32, q_dot="bf16", p_before_pv="bf16", output="bf16")

BUGS = {"window+1": "local_window_size = (0, W): one key too many",
        "rope-from-slot": "RoPE from the ring slot (index mod C) instead of the true position"}


def rope(x, positions, style, R, scaling, theta, factor):
    """Rotates x [n][H][D] (f32) at positions [n] (int32), as a JAX model's apply_rope does: the first R
    dims rotated (neox: pairs (k, k + R/2); gptj: pairs (2k, 2k + 1)), angles in f32. theta and factor
    are traced values, style, R and the scaling kind shape the code."""
    if style == "none":
        return x
    if scaling == "ntk":
        theta = theta * factor ** (R / (R - 2))
    inv_freq = 1.0 / (theta ** (jnp.arange(0, R, 2, dtype=jnp.float32) / R))
    p = positions.astype(jnp.float32)
    if scaling == "linear":
        p = p / factor
    angle = p[:, None, None] * inv_freq  # [n][1][R/2]
    cos, sin = jnp.cos(angle), jnp.sin(angle)
    if style == "neox":
        a, b = x[..., :R // 2], x[..., R // 2:R]
        rot = jnp.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)
    else:
        a, b = x[..., 0:R:2], x[..., 1:R:2]
        rot = jnp.stack([a * cos - b * sin, a * sin + b * cos], axis=-1).reshape(x.shape[:-1] + (R,))
    return jnp.concatenate([rot, x[..., R:]], axis=-1)


class JaxAttention:
    name = NAME

    def capabilities(self):
        return {"k_dtypes": ["f32", "bf16"], "v_dtypes": ["f32", "bf16"], "int8_schemes": [],
                "int8_roundings": [], "rope_styles": ["none", "neox", "gptj"], "rope_scalings": ["none", "linear", "ntk"],
                "sinks": False, "sink_logits": False, "softcap": False, "per_layer_rope": True,
                "partial_rotary": True, "settable_p0": True, "min_window": 1, "profile": PROFILE_F32}

    def unsupported(self, case):
        if case.k_dtype != case.v_dtype:
            return f"K {case.k_dtype} and V {case.v_dtype}: dot_product_attention takes one dtype for q, K and V"
        if case.k_dtype == "f16":
            return F16_ERROR
        if case.k_dtype not in DTYPES:
            return f"K/V {case.k_dtype}: dot_product_attention has no quantised K/V (int8, fp8 with a scale)"
        if case.softcap:
            return "softcap: dot_product_attention has no logit softcap"
        if case.sink_logits:
            return "sink logits: dot_product_attention has no learned sink logit"
        for l, layer in enumerate(case.layers):
            if layer["sinks"]:
                return f"layer {l}: {layer['sinks']} sink tokens (a ring of W slots keeps no prefix)"
        return None

    def profile(self, case):
        return PROFILE_BF16 if case.k_dtype == "bf16" else PROFILE_F32

    def __init__(self, bug=None):
        self.bug = bug

    def start(self, case):
        self.case, self.dt = case, DTYPES[case.k_dtype]
        self.rings = [{} for _ in case.layers]  # per layer: sequence -> (K ring [C][Hkv][D], V ring, tokens appended)

    def reset(self, seq, p0):
        for rings in self.rings:
            rings.pop(seq, None)

    def append(self, chunks):
        case, dt, bug = self.case, self.dt, self.bug
        results = []
        for c in chunks:
            shape_q, shape_k = (case.L, c.n, case.Hq, case.D), (case.L, c.n, case.Hkv, case.D)
            r = {"out": np.zeros(shape_q, np.float32), "q_rot": np.zeros(shape_q, np.float32),
                 "k_rot": np.zeros(shape_k, np.float32), "k_stored": np.zeros(shape_k, np.float32),
                 "v_stored": np.zeros(shape_k, np.float32)}
            for l, layer in enumerate(case.layers):
                W = layer["window"]
                C = min(W, case.max_tokens)  # ring capacity
                rp = layer["rope"]
                rope_args = (rp["style"], rp["rotary_dim"] or case.D, rp["scaling"], np.float32(rp["theta"]),
                             np.float32(rp["factor"]))
                rings = self.rings[l]
                if c.index == 0:
                    rings[c.seq] = (np.zeros((C, case.Hkv, case.D), dt), np.zeros((C, case.Hkv, case.D), dt), 0)
                ring_k, ring_v, count = rings[c.seq]
                # Fixed shapes, as a JAX server buckets them: the chunk padded to a power of two NB,
                # the keys to C + NB, the padding masked by query_seq_lengths/key_value_seq_lengths.
                nb = 1 << (c.n - 1).bit_length()
                index = np.arange(c.index, c.index + nb, dtype=np.int32)
                if bug == "rope-from-slot":
                    index = index % C
                positions = np.int32(c.position - c.index) + index
                key_order, n_keys = newest_first(C, count, c.n, nb)
                pad = ((0, nb - c.n), (0, 0), (0, 0))
                window = W + (1 if bug == "window+1" else 0)
                q_rot, k_rot, k_new, v_new, o = decode_step(
                    np.pad(c.q[l], pad), np.pad(c.k[l], pad), np.pad(c.v[l], pad), ring_k, ring_v, positions,
                    key_order, np.int32(c.n), np.int32(n_keys), *rope_args[3:], np.float32(case.scale),
                    *rope_args[:3], window, dt)
                k_new, v_new = np.asarray(k_new), np.asarray(v_new)
                for i in range(max(0, c.n - C), c.n):  # the chunk into the ring: token i in slot i mod C
                    ring_k[(count + i) % C], ring_v[(count + i) % C] = k_new[i], v_new[i]
                rings[c.seq] = (ring_k, ring_v, count + c.n)
                r["out"][l] = np.asarray(o, np.float32)[:c.n]
                r["q_rot"][l] = np.asarray(q_rot)[:c.n]
                r["k_rot"][l] = np.asarray(k_rot)[:c.n]
                r["k_stored"][l] = k_new[:c.n].astype(np.float32)
                r["v_stored"][l] = v_new[:c.n].astype(np.float32)
            results.append(r)
        return results


def newest_first(C, count, n, nb):
    """The keys of a chunk of n tokens (padded to nb) after `count` tokens, as indices into
    concat(ring of C slots, chunk): the chunk newest first, then the ring's min(count, C) keys newest
    first (token i is in slot i mod C), then padding. Returns (indices [C + nb], number of real keys)."""
    off = min(count, C)
    order = np.zeros(C + nb, np.int32)
    order[:off + n] = np.concatenate([C + np.arange(n)[::-1], (count - 1 - np.arange(off)) % C])
    return order, off + n


@functools.partial(jax.jit, static_argnames=("style", "R", "scaling", "window", "dt"))
def decode_step(q, k, v, ring_k, ring_v, positions, key_order, n, n_keys, theta, factor, scale,
                style, R, scaling, window, dt):
    """One chunk of one sequence through one layer, with fixed shapes.

    q [NB][Hq][D], k and v [NB][Hkv][D]: the chunk's n raw tokens, then padding; positions [NB] (int32);
    ring_k, ring_v [C][Hkv][D]: the ring (model dtype); key_order [C + NB]: indices into
    concat(ring, chunk) listing the n_keys real keys newest first (the chunk's last token first), then
    padding. Queries are taken newest first too: query i'' (chunk token n - 1 - i'') has its own key at
    i'' and the key d tokens before it at i'' + d, so spec §2's window of W keys is exactly JAX's
    local_window_size = (0, W - 1) over these arrays (convention_test.py), and the padding, at the end
    of both, is what query_seq_lengths and key_value_seq_lengths mask.
    Returns q_rot and k_rot (f32), K and V as stored (model dtype), the output [NB][Hq][D] in chunk order."""
    q_rot = rope(q, positions, style, R, scaling, theta, factor)
    k_rot = rope(k, positions, style, R, scaling, theta, factor)
    k_new, v_new = k_rot.astype(dt), v.astype(dt)
    keys = jnp.concatenate([ring_k, k_new])[key_order]
    values = jnp.concatenate([ring_v, v_new])[key_order]
    q_order = (n - 1 - jnp.arange(q.shape[0])) % q.shape[0]  # newest first; its own inverse on the n real rows
    o = jax.nn.dot_product_attention(q_rot.astype(dt)[q_order][None], keys[None], values[None], scale=scale,
                                     query_seq_lengths=n[None], key_value_seq_lengths=n_keys[None],
                                     local_window_size=(0, window - 1), implementation="xla")[0]
    return q_rot, k_rot, k_new, v_new, o[q_order]


if __name__ == "__main__":
    main(JaxAttention, __doc__, BUGS)
