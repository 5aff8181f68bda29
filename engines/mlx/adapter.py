#!/usr/bin/env python3
"""ringkv adapter for mlx-lm: its real ring cache RotatingKVCache (and BatchRotatingKVCache), on mlx's CPU.

    adapter.py GOLDEN_DIR OUT_DIR [--ringkv RINGKV] [--filter REGEX] [--bug window+1|rope-from-slot]
    ringkv check --outputs OUT_DIR --golden GOLDEN_DIR

What runs is mlx-lm's own code as its models call it; the adapter only builds a model around it:
- each layer is an mlx-lm attention module built from a ModelArgs: `mlx_lm.models.llama.Attention`
  (llama, ministral3 and most mlx-lm models), or `mlx_lm.models.gpt_oss.AttentionBlock` for cases with
  learned sink logits (its `sinks`). The hidden size is (Hq + 2 Hkv) D and the hidden state of a token
  is its raw q, k and v side by side; q_proj, k_proj and v_proj are 0/1 selection matrices and o_proj
  is the identity onto the first block (biases 0), so the case's q, k and v reach RoPE unchanged and
  the attention output leaves unchanged: each output element is x·1 plus zeros, exact in any dtype
  for finite x (every golden input is finite). The module then does what it does in a model: RoPE
  (`initialize_rope`: nn.RoPE, offset = cache.offset), `cache.update_and_fetch`, and
  `scaled_dot_product_attention` (mx.fast.scaled_dot_product_attention) with the mask it is given;
- the caches are what the models' `make_cache` makes: a sliding layer (W < max_tokens) gets
  `RotatingKVCache(max_size=S + W + Q, keep=S)` (gemma3, gpt-oss, ministral3 and llama's sliding layers
  use max_size = W, keep 0; `mlx_lm.generate --max-kv-size N` gives every layer of a model without
  make_cache max_size = N, keep = 4; Q is the case's rollback reserve), a layer whose window never
  slides a `KVCache`;
- the masks are built as LlamaModel.__call__ / GptOssMoeModel.__call__ build them: once per forward,
  before any layer runs (so before any cache is updated), with `create_attention_mask(h, cache)` from
  the first cache of each kind: `window_size = W` (the model's sliding_window) for sliding layers
  without sinks, no window for layers with sinks (the --max-kv-size path, the only one that uses keep:
  its mask comes from the full-attention call `create_attention_mask(h, cache)`), none for KVCache.

Paths (every one judged by the committed goldens and the random set):
- one sequence (batch 1, and every case with batch > 1 whose schedule is not batch generation's, below):
  each sequence has its own caches, as `mlx_lm.generate` / `stream_generate` keep them; a chunk of one
  token takes RotatingKVCache's in-place path (`_update_in_place`), a longer one the concatenating
  path (`_update_concat`). A reset gives the sequence fresh caches (make_cache), as a new request gets.
- batch generation: a case with batch > 1 in which every step appends to every sequence, with no reset
  and no rollback, runs as mlx_lm's BatchGenerator runs its batches (generate.py PromptProcessingBatch /
  GenerationBatch): the per-sequence caches merged (`RotatingKVCache.merge` -> BatchRotatingKVCache,
  `KVCache.merge` -> BatchKVCache); a step whose chunks differ in length is right-padded with
  `cache.prepare(lengths=..., right_padding=...)` before and `cache.finalize()` after the forward (as
  PromptProcessingBatch.prompt), a step of equal chunks is one forward (one token: the in-place decode
  of GenerationBatch._step).
- rollback (speculative decoding's `trim_prompt_cache`): a step's rollbacks are honoured when
  `can_trim_prompt_cache` holds for every rolled-back sequence, then `trim_prompt_cache(cache, n)`; when
  it does not, trim_prompt_cache trims nothing and returns 0: the adapter reports that as a refusal
  (ringkv.Refused, which changes nothing, true here). mlx_lm's speculative_generate_step ignores the
  0 (generate.py _rewind_cache): docs/engines.md (mlx-lm).

Not expressible, declared in capabilities.json or per case as unsupported, never emulated here:
start positions other than 0 and resets to p0 != 0 (positions come from cache.offset), INT8 and fp8
caches (RotatingKVCache.to_quantized: "RotatingKVCache Quantization NYI"), K and V of different dtypes
(one model dtype), softcap (no such parameter in these modules), RoPE none (initialize_rope always
rotates), partial rotary (initialize_rope rotates head_dim), NTK scaling (mlx-lm's "dynamic" RoPE
scales only past max_position_embeddings; the spec's NTK is static), more than one sliding window
(a model has one sliding_window), sink tokens of different counts per layer, sink tokens with a
rollback reserve (keep is only used with a window of the whole cache), sink logits with gptj RoPE
(gpt-oss's RoPE is neox).

The rotated q and k and the stored K/V are not returned: reading them would need the ring's slot
arithmetic, which is the engine's; only "out" is judged.
"""
import os
import sys

import numpy as np
import mlx.core as mx
import mlx_lm
from mlx_lm.models import gpt_oss, llama
from mlx_lm.models.base import create_attention_mask
from mlx_lm.models.cache import KVCache, RotatingKVCache, can_trim_prompt_cache, trim_prompt_cache

# The ringkv package of this repository (python/src), ahead of any installed copy.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "src"))
from ringkv import Refused  # noqa: E402
from ringkv.adapter import main  # noqa: E402

mx.set_default_device(mx.cpu)
NAME = f"mlx-lm-{mlx_lm.__version__} RotatingKVCache (mlx-{mx.__version__}, CPU)"
DTYPES = {"f32": mx.float32, "f16": mx.float16, "bf16": mx.bfloat16}

# Precision, from mlx's CPU code (mlx[cpu] has no GPU backend: mlx/backend/no_gpu/primitives.cpp makes
# fast::ScaledDotProductAttention::use_fallback return true, and RoPE falls back on the CPU too), so the
# fallbacks of mlx/fast.cpp run:
# - RoPE (fast.cpp rope fallback): positions and angles in f32 (arange(T, float32) + offset, times
#   inv_freq = exp(-i log(base) / (dims/2)) in f32), cos and sin cast to the input dtype
#   (`astype(cos(theta), t)`), the rotation in the input dtype;
# - attention (fast.cpp scaled_dot_product_attention fallback): q * scale in the input dtype, scores =
#   matmul(q, k^T) (mlx/backend/cpu/gemms/simd_bf16.cpp, simd_fp16.cpp: simd_gemm<T, float>: sums in
#   f32, the result stored as T: the scores are rounded to the model dtype), softmax(precise=True)
#   (f32 inside, P stored as T), matmul(P, V) summed in f32, the output in T.
# f32 models are therefore profiles/f32-rope-angles.json exactly. For f16 and bf16 models, q, P, the
# output and cos/sin are in that dtype, and the scores are rounded to it: the profile has no key for a
# rounded score, so the "score arithmetic" key qk_accumulator carries it (looser than the kernel).
PROFILE_F32 = {"q_dot": "f32", "q_quant": "none", "k_storage": "as_configured", "v_storage": "as_configured",
               "qk_accumulator": "f32", "pv_accumulator": "f32", "p_before_pv": "f32", "output": "f32",
               "rope_angle": "f32"}
PROFILES = {"f32": PROFILE_F32}
for _dt in ("f16", "bf16"):
    PROFILES[_dt] = dict(PROFILE_F32, q_dot=_dt, qk_accumulator=_dt, p_before_pv=_dt, output=_dt, rope_angle=_dt)

BUGS = {"window+1": "every sliding layer built with sliding window W + 1 (RotatingKVCache max_size and mask window)",
        "rope-from-slot": "RoPE offset cache.offset mod C (the ring slot) instead of cache.offset (the position)"}


class SlotRoPE:
    """The planted bug rope-from-slot: the model's own RoPE module, called with offset mod C."""

    def __init__(self, rope, capacity):
        self.rope, self.capacity = rope, capacity

    def __call__(self, x, offset=0):
        return self.rope(x, offset=offset % self.capacity)


class Layer:
    """One attention layer of an mlx-lm model with the selection projections (module docstring)."""

    def __init__(self, Hq, Hkv, D, dtype, window, sinks, reserve, max_tokens, rope, scale, sink_logits=None,
                 bug=None):
        self.Hq, self.Hkv, self.D = Hq, Hkv, D
        self.sliding = window < max_tokens
        self.window = window + (1 if bug == "window+1" and self.sliding else 0)
        self.sinks, self.reserve = sinks, reserve
        self.capacity = sinks + self.window + reserve  # RotatingKVCache max_size
        scaling = {"type": "linear", "factor": rope["factor"]} if rope["scaling"] == "linear" else None
        hidden = (Hq + 2 * Hkv) * D
        if sink_logits is None:
            args = llama.ModelArgs(model_type="llama", hidden_size=hidden, num_hidden_layers=1, intermediate_size=1,
                                   num_attention_heads=Hq, num_key_value_heads=Hkv, head_dim=D, rms_norm_eps=1e-5,
                                   vocab_size=1, rope_theta=rope["theta"], rope_traditional=rope["style"] == "gptj",
                                   rope_scaling=scaling)
            self.attn = llama.Attention(args)
            self.attn.scale = scale  # a model sets it from its config (e.g. gemma3's query_pre_attn_scalar)
        else:
            args = gpt_oss.ModelArgs(hidden_size=hidden, head_dim=D, num_attention_heads=Hq,
                                     num_key_value_heads=Hkv, sliding_window=window, rope_theta=rope["theta"],
                                     rope_scaling=scaling)
            self.attn = gpt_oss.AttentionBlock(args)
            self.attn.sm_scale = scale
            self.attn.sinks = mx.array(np.asarray(sink_logits, np.float32)).astype(dtype)
        eye = np.eye(hidden, dtype=np.float32)
        weights = {"q_proj": eye[:Hq * D], "k_proj": eye[Hq * D:(Hq + Hkv) * D], "v_proj": eye[(Hq + Hkv) * D:],
                   "o_proj": eye[:, :Hq * D]}
        for name, w in weights.items():
            proj = getattr(self.attn, name)
            proj.weight = mx.array(w).astype(dtype)
            if "bias" in proj:
                proj.bias = mx.zeros(proj.bias.shape, dtype)
        if bug == "rope-from-slot" and self.sliding:
            self.attn.rope = SlotRoPE(self.attn.rope, self.capacity)

    def new_cache(self):
        """What the model's make_cache makes for this layer (module docstring)."""
        if not self.sliding:
            return KVCache()
        return RotatingKVCache(max_size=self.capacity, keep=self.sinks)

    def mask_group(self):
        return ("sliding", self.window, self.sinks, self.reserve) if self.sliding else ("full",)

    def mask_window(self):
        """window_size for create_attention_mask: the model's sliding_window, none with keep (--max-kv-size)."""
        return self.window if self.sliding and self.sinks == 0 else None


class Model:
    """The layers of a case, called as LlamaModel.__call__ calls its layers: masks first, then the layers."""

    def __init__(self, layers, dtype):
        self.layers, self.dtype = layers, dtype

    def hidden(self, q, k, v):
        """The hidden state [B][n][(Hq + 2 Hkv) D] of tokens q [B][n][Hq][D], k and v [B][n][Hkv][D]."""
        B, n = q.shape[:2]
        x = np.concatenate([q.reshape(B, n, -1), k.reshape(B, n, -1), v.reshape(B, n, -1)], axis=-1)
        return mx.array(np.ascontiguousarray(x, np.float32)).astype(self.dtype)

    def forward(self, hs, caches):
        """hs: per layer the hidden state [B][n][hidden]; caches: per layer. Returns per layer the
        attention output [B][n][Hq][D] (f32 numpy)."""
        masks = {}
        for layer, h, cache in zip(self.layers, hs, caches):  # first cache of each kind, before any update
            group = layer.mask_group()
            if group not in masks:
                masks[group] = create_attention_mask(h, cache, window_size=layer.mask_window())
        outs = [layer.attn(h, masks[layer.mask_group()], cache=cache)
                for layer, h, cache in zip(self.layers, hs, caches)]
        mx.eval(outs, [c.state for c in caches])
        return [np.asarray(o.astype(mx.float32))[..., :layer.Hq * layer.D].reshape(o.shape[0], o.shape[1], layer.Hq,
                                                                                     layer.D)
                for layer, o in zip(self.layers, outs)]


def batch_generation_schedule(case):
    """True when the schedule is what mlx_lm's BatchGenerator does with a batch: every step appends to
    every sequence, no resets, no rollbacks."""
    return case.B > 1 and all(len(s.chunks) == case.B and not s.resets and not s.rollbacks for s in case.steps)


class MlxRing:
    name = NAME

    def __init__(self, bug=None):
        self.bug = bug

    def capabilities(self):
        return {"k_dtypes": ["f32", "f16", "bf16"], "v_dtypes": ["f32", "f16", "bf16"], "int8_schemes": [],
                "int8_roundings": [], "rope_styles": ["neox", "gptj"], "rope_scalings": ["none", "linear"],
                "sinks": True, "sink_logits": True, "softcap": False, "per_layer_rope": True,
                "partial_rotary": False, "settable_p0": False, "kv_formats_differ": False,
                "max_sliding_windows": 1, "min_window": 1, "rollback": True, "max_rollback_reserve": 2 ** 30,
                "profile": PROFILE_F32}

    def unsupported(self, case):
        if case.k_dtype != case.v_dtype:
            return f"K {case.k_dtype} and V {case.v_dtype}: an mlx-lm model has one dtype"
        if case.k_dtype not in DTYPES:
            return f"K/V {case.k_dtype}: RotatingKVCache has no quantised cache (to_quantized: Quantization NYI)"
        if case.softcap:
            return "softcap: llama.Attention and gpt_oss.AttentionBlock have no logit softcap"
        if any(case.start_positions) or any(p0 for s in case.steps for _, p0 in s.resets):
            return "start position != 0: mlx-lm's RoPE positions are cache.offset, the tokens held"
        sliding = [l for l in case.layers if l["window"] < case.max_tokens]
        if len({l["window"] for l in sliding}) > 1:
            return "several sliding windows: an mlx-lm model has one sliding_window"
        if len({l["sinks"] for l in sliding}) > 1:
            return "sink tokens of different counts per layer: keep is one value for every layer (make_prompt_cache)"
        for l, layer in enumerate(case.layers):
            rp = layer["rope"]
            if rp["style"] == "none" or rp["scaling"] == "ntk" or (rp["rotary_dim"] or case.D) != case.D:
                return f"layer {l}: RoPE {rp['style']}/{rp['scaling']}/rotary_dim {rp['rotary_dim']}: initialize_rope " \
                       "rotates the whole head, neox or gptj, with no or linear scaling"
            if layer["sinks"] and layer.get("rollback_reserve", 0) and layer["window"] < case.max_tokens:
                return f"layer {l}: sink tokens with a rollback reserve: keep is only used with a window of the " \
                       "whole cache (--max-kv-size), so a ring larger than S + W has no sink-aware mask"
            if case.sink_logits and rp["style"] != "neox":
                return f"layer {l}: sink logits with {rp['style']} RoPE: gpt_oss.AttentionBlock's RoPE is neox"
        return None

    def profile(self, case):
        return PROFILES[case.k_dtype]

    def start(self, case):
        self.case, dtype = case, DTYPES[case.k_dtype]
        layers = [Layer(case.Hq, case.Hkv, case.D, dtype, lay["window"], lay["sinks"], lay.get("rollback_reserve", 0),
                        case.max_tokens, lay["rope"], case.scale,
                        case.sink_logits[l] if case.sink_logits else None, self.bug)
                  for l, lay in enumerate(case.layers)]
        self.model = Model(layers, dtype)
        self.batched = batch_generation_schedule(case)
        if self.batched:  # BatchGenerator: per-sequence caches from make_cache, merged (_merge_caches)
            self.caches = [type(layer.new_cache()).merge([layer.new_cache() for _ in range(case.B)])
                           for layer in layers]
        else:
            self.caches = [[layer.new_cache() for layer in layers] for _ in range(case.B)]

    def reset(self, seq, p0):
        self.caches[seq] = [layer.new_cache() for layer in self.model.layers]  # a new request's caches

    def rollback(self, rollbacks):
        if not all(can_trim_prompt_cache(self.caches[seq]) for seq, _ in rollbacks):
            raise Refused("can_trim_prompt_cache is false: trim_prompt_cache would trim 0 tokens")
        for seq, n in rollbacks:
            trimmed = trim_prompt_cache(self.caches[seq], n)
            if trimmed != n:
                raise RuntimeError(f"trim_prompt_cache trimmed {trimmed} of {n} tokens of sequence {seq}")

    def append(self, chunks):
        return self.append_batched(chunks) if self.batched else [self.append_one(c) for c in chunks]

    def append_one(self, c):
        hs = [self.model.hidden(c.q[l][None], c.k[l][None], c.v[l][None]) for l in range(self.case.L)]
        outs = self.model.forward(hs, self.caches[c.seq])
        return np.stack([o[0] for o in outs])

    def append_batched(self, chunks):
        case, lengths = self.case, [c.n for c in chunks]
        n = max(lengths)
        padding = [n - m for m in lengths]
        hs = []
        for l in range(case.L):  # right-padded with zeros (PromptProcessingBatch.prompt pads with token 0)
            q, k, v = (np.zeros((case.B, n) + c_shape, np.float32) for c_shape in
                       ((case.Hq, case.D), (case.Hkv, case.D), (case.Hkv, case.D)))
            for b, c in enumerate(chunks):
                q[b, :c.n], k[b, :c.n], v[b, :c.n] = c.q[l], c.k[l], c.v[l]
            hs.append(self.model.hidden(q, k, v))
        if max(padding) > 0:
            for cache in self.caches:
                cache.prepare(lengths=lengths, right_padding=padding)
        outs = self.model.forward(hs, self.caches)
        if max(padding) > 0:
            for cache in self.caches:
                cache.finalize()
            mx.eval([cache.state for cache in self.caches])
        return [np.stack([o[b, :c.n] for o in outs]) for b, c in enumerate(chunks)]


if __name__ == "__main__":
    main(MlxRing, __doc__, BUGS)
