#!/usr/bin/env python3
"""ringkv adapter for ExecuTorch: its Llama attention (`AttentionMHA`) with the ring KV cache its exporter
installs for local/global attention, eager, on the CPU.

    adapter.py GOLDEN_DIR OUT_DIR [--ringkv RINGKV] [--filter REGEX] [--bug window+1|rope-from-slot]
    ringkv check --outputs OUT_DIR --golden GOLDEN_DIR

(the variant comes from the environment, RINGKV_ENGINE_VARIANT; VARIANTS below.) What runs is ExecuTorch's
own code from its wheel (executorch/examples/models/llama, as `export_llama` builds a model):
- each layer is `attention.AttentionMHA(ModelArgs, layer_id, Rope)` with ExecuTorch's `Rope` (one per
  model, as `llama_transformer.Transformer` holds it; `use_hf_rope` for neox pairs, the Llama path for
  gptj pairs; `partial_rotary_factor`; `rope_freq_base` theta). The hidden size is (Hq + 2 Hkv) D and the
  hidden state of a token is its raw q, k and v side by side: wq, wk and wv are 0/1 selection matrices
  and wo the identity onto the first Hq D entries, so the case's q, k and v reach ExecuTorch's RoPE
  unchanged and the attention output leaves unchanged (x·1 plus zeros: exact for finite inputs). The
  layers are independent, as ringkv's are: layer l gets the case's q, k, v of layer l, never layer l-1's
  output;
- the caches are what `export_llama_lib._get_source_transforms` installs, in its order: with
  `use_sdpa_with_kv_cache` (variant custom) `replace_sdpa_with_custom_op` then
  `replace_kv_cache_with_custom_kv_cache` (torch.ops.llama.custom_sdpa, update_cache); then, for
  `--local_global_attention`, `replace_kv_cache_with_ring_kv_cache(model, layer_sizes)` with layer size W
  for a sliding layer and 0 for a full one: `RingKVCache` (2 W slots, `CachePositionsManager`, the mask
  from the cached positions) or its custom-op counterpart; then `model.to(dtype)`;
- variant sink: what `export_llama --use_attention_sink S,W` builds (model.py: `enable_attention_sink`
  after the model is built, for every layer; no local/global ring): `RopeWithAttentionSink` in place of
  the Rope (positions remapped: p < S as is, else S + (p - S) mod 2 W) and `KVCacheWithAttentionSink`
  (S sink slots and a ring of 2 W, `CachePositionsManagerWithSink` starting at -1, the mask: filled,
  causal, and a sink or within W) or, for S = 0, a plain `RingKVCache` of W; then `model.to(dtype)`.
  One S and one W per model: a case whose layers differ in either is unsupported; max_context_len is
  S + 2 W rounded up (the remapped positions stay below it);
- the forward is `Transformer.forward`'s: freqs from `rope.get_freqs(input_pos, seqlen)`, then every layer
  called with `input_pos` (dynamic shapes: `[start]`; static: every position of the chunk).

One sequence is one model (ExecuTorch's runners serve one sequence; `max_batch_size` 1): a case's
sequences each get their own, and a reset gives the sequence a new one (a new runner session). A
sequence starts at position 0: `input_pos` is both the RoPE position and the token's place in the
cache (the full layers' KVCache indexes by it, RingKVCache takes every slot below the first input_pos
as written: CachePositionsManager starts at zeros, so a fresh cache called first at input_pos 50 attends
50 slots of position 0 and zero K/V), so a start position other than 0 is not something ExecuTorch can
be asked for (settable_p0 false), as for mlx-lm.

Not expressible, declared in capabilities.json or per case as unsupported, never emulated here: sink
tokens (but for the sink variant) and learned sink logits, softcap, softmax scales other than 1/sqrt(D)
(SDPA's default), RoPE none, scaling (linear and NTK: ExecuTorch has llama3 and LongRoPE only), per-layer
RoPE (one Rope per model; ModelArgs' local_rope_theta is read by nothing in the llama path), K and V in
different dtypes, INT8 and fp8 (the quantized cache is torchao's affine per-token scheme, not a spec 1
format), rollback (no API), positions past MAX_CONTEXT (Rope precomputes a table of max_context_len
positions); in the sink variant, several windows or sink counts, S + 2 W past MAX_CONTEXT and a chunk of
more than 2 W window tokens (KVCacheWithAttentionSink.update asserts that they fit its ring).

The rotated q and k and the stored K/V are not returned: only "out" is judged.
"""
import os
import sys

import numpy as np
import torch

import executorch  # noqa: F401
from executorch.examples.models.llama.attention import AttentionMHA
from executorch.examples.models.llama.model_args import ModelArgs
from executorch.examples.models.llama.rope import Rope
from executorch.examples.models.llama.source_transformation.custom_kv_cache import (
    replace_kv_cache_with_custom_kv_cache, replace_kv_cache_with_ring_kv_cache)
from executorch.examples.models.llama.source_transformation.attention_sink import enable_attention_sink
from executorch.examples.models.llama.source_transformation.sdpa import replace_sdpa_with_custom_op

# The ringkv package of this repository (python/src), ahead of any installed copy.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "src"))
from ringkv.adapter import main  # noqa: E402

torch.manual_seed(0)
VERSION = "1.5.1"
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
MAX_CONTEXT = 1 << 16  # the largest max_context_len built here: Rope's table is max_context_len x D floats
BUGS = {"window+1": "replace_kv_cache_with_ring_kv_cache given W + 1 for every sliding layer: one key too many",
        "rope-from-slot": "rope.get_freqs at input_pos mod W (the ring slot) instead of the position"}
# Each variant: the exporter's options (export_llama: --use_sdpa_with_kv_cache, --enable_dynamic_shape).
VARIANTS = {
    "ring": dict(custom=False, dynamic=True),    # RingKVCache and AttentionMHA's SDPA (F.scaled_dot_product_attention)
    "static": dict(custom=False, dynamic=False),  # the same with static shapes (input_pos: every position)
    "custom": dict(custom=True, dynamic=True),    # CustomRingKVCache and torch.ops.llama.custom_sdpa (XNNPACK exports)
    # export_llama --use_attention_sink S,W: enable_attention_sink (RopeWithAttentionSink, KVCacheWithAttentionSink:
    # S sink slots and a ring of 2 W) on every layer, in place of the local/global ring
    "sink": dict(custom=False, dynamic=True, sink=True),
    # the custom variant's model exported (export_llama -X --xnnpack-extended-ops --use_sdpa_with_kv_cache
    # --local_global_attention: LLMEdgeManager, to_edge_transform_and_lower with XNNPACK, to_executorch) and
    # the .pte run by ExecuTorch's runtime (pte.py); dynamic shapes
    "pte": dict(custom=True, dynamic=True, exported=True),
}

# Precision. f32 models: f32 everywhere (ExecuTorch's Rope tables in f32; torch's CPU SDPA and custom_sdpa
# sum in f32). f16/bf16 models (model.to(dtype): the cache in the dtype): q and k rotated in f32 (the Llama
# path: xq.float() ... type_as; the HF path: the f32 tables promote the product) and rounded to the dtype,
# the attention sums in f32, P rounded to the dtype before P.V, the output in the dtype.
PROFILE_F32 = {"q_dot": "f32", "q_quant": "none", "k_storage": "as_configured", "v_storage": "as_configured",
               "qk_accumulator": "f32", "pv_accumulator": "f32", "p_before_pv": "f32", "output": "f32",
               "rope_angle": "f32"}


def low_precision_profile(dt):
    return dict(PROFILE_F32, q_dot=dt, p_before_pv=dt, output=dt)


class Block(torch.nn.Module):
    """What replace_kv_cache_with_ring_kv_cache walks: a transformer block with its `attention`."""

    def __init__(self, attention):
        super().__init__()
        self.attention = attention


class Model(torch.nn.Module):
    """One sequence's layers, built and transformed as export_llama builds and transforms a Llama model."""

    def __init__(self, case, variant, bug):
        super().__init__()
        self.case, self.variant, self.bug = case, variant, bug
        Hq, Hkv, D = case.Hq, case.Hkv, case.D
        rope = case.layers[0]["rope"]
        self.context = sink_context_length(case) if VARIANTS[variant].get("sink") else context_length(case)
        self.args = ModelArgs(dim=(Hq + 2 * Hkv) * D, n_heads=Hq, n_kv_heads=Hkv, head_dim=D, n_layers=case.L,
                              max_batch_size=1, max_seq_len=self.context, max_context_len=self.context,
                              use_kv_cache=True, enable_dynamic_shape=VARIANTS[variant]["dynamic"],
                              use_hf_rope=rope["style"] == "neox", rope_freq_base=float(rope["theta"]),
                              partial_rotary_factor=(rope.get("rotary_dim") or D) / D)
        self.rope = Rope(self.args)
        self.layers = torch.nn.ModuleList(Block(self.attention(l)) for l in range(case.L))
        if VARIANTS[variant]["custom"]:
            replace_sdpa_with_custom_op(self)
            replace_kv_cache_with_custom_kv_cache(self)
        self.windows = [case.layers[l]["window"] if case.is_sliding(l) else 0 for l in range(case.L)]
        sizes = [w + 1 if w and bug == "window+1" else w for w in self.windows]
        if VARIANTS[variant].get("sink"):  # one S and W for every layer (unsupported() checks), full or sliding
            w = case.layers[0]["window"]
            enable_attention_sink(self, self.args, case.layers[0]["sinks"], w + 1 if bug == "window+1" else w)
        elif any(sizes):
            replace_kv_cache_with_ring_kv_cache(self, sizes)
        self.to(dtype=DTYPES[case.k_dtype])

    def attention(self, l):
        """AttentionMHA with the selection projections (module docstring)."""
        attn = AttentionMHA(self.args, l, self.rope)
        Hq, Hkv, D = self.case.Hq, self.case.Hkv, self.case.D
        dim = self.args.dim
        eye = torch.eye(dim)
        with torch.no_grad():
            attn.wq.weight.copy_(eye[:Hq * D])
            attn.wk.weight.copy_(eye[Hq * D:(Hq + Hkv) * D])
            attn.wv.weight.copy_(eye[(Hq + Hkv) * D:])
            attn.wo.weight.copy_(eye[:, :Hq * D])
        return attn

    def forward_chunk(self, chunk):
        """One chunk through every layer, as Transformer.forward: freqs once, then each layer."""
        n, start = chunk.n, chunk.position
        positions = torch.arange(start, start + n, dtype=torch.long)
        input_pos = positions[:1] if self.args.enable_dynamic_shape else positions
        dtype = DTYPES[self.case.k_dtype]
        outs = []
        hidden = hidden_states(chunk)
        for l, block in enumerate(self.layers):
            freq_pos = input_pos
            if self.bug == "rope-from-slot" and self.windows[l]:
                freq_pos = input_pos % self.windows[l]
            freqs_cos, freqs_sin = self.rope.get_freqs(freq_pos, n)
            x = torch.from_numpy(hidden[l]).to(dtype)[None]
            with torch.no_grad():
                h, _ = block.attention(x, freqs_cos, freqs_sin, input_pos=input_pos)
            outs.append(h[0, :, :self.case.Hq * self.case.D].float().numpy().reshape(n, self.case.Hq, self.case.D))
        return np.stack(outs)


def hidden_states(chunk):
    """[L, n, (Hq + 2 Hkv) D] float32: each token's raw q, k and v side by side, per layer."""
    L, n = len(chunk.q), chunk.n
    return np.ascontiguousarray(np.concatenate([np.asarray(chunk.q).reshape(L, n, -1), np.asarray(chunk.k).reshape(L, n, -1),
                                                np.asarray(chunk.v).reshape(L, n, -1)], axis=-1), np.float32)


def context_length(case):
    """max_context_len: every position of the case (Rope's table, a full layer's cache), rounded up."""
    return max(64, -(-(case.max_position() + 1) // 64) * 64)


def sink_context_length(case):
    """max_context_len of the sink variant: RopeWithAttentionSink's (remapped) positions stay below S + 2 W,
    whatever the true position (export_llama asserts only max_context_length >= S + W)."""
    lay = case.layers[0]
    return max(64, -(-(lay["sinks"] + 2 * lay["window"]) // 64) * 64)


class ExecuTorchRing:
    def __init__(self, bug):
        self.variant = os.environ.get("RINGKV_ENGINE_VARIANT") or "ring"
        if self.variant not in VARIANTS:
            raise SystemExit(f"unknown variant {self.variant!r} (one of {', '.join(VARIANTS)})")
        self.bug = bug
        self.exported = bool(VARIANTS[self.variant].get("exported"))
        self.programs = {}  # pte: one exported program per model configuration (program_key), for the whole run
        what = "CustomRingKVCache, custom_sdpa" if VARIANTS[self.variant]["custom"] else "RingKVCache"
        if self.exported:
            what = f"exported program (.pte, XNNPACK) of AttentionMHA + {what}, run by executorch.runtime"
        self.name = f"executorch-{VERSION} {'' if self.exported else 'AttentionMHA + '}{what}" \
                    f" ({self.variant}, torch-{torch.__version__.split('+')[0]}, CPU)"

    def capabilities(self):
        return {"k_dtypes": ["f32", "f16", "bf16"], "v_dtypes": ["f32", "f16", "bf16"], "kv_formats_differ": False,
                "int8_schemes": [], "int8_roundings": [], "rope_styles": ["neox", "gptj"], "rope_scalings": ["none"],
                "sinks": bool(VARIANTS[self.variant].get("sink")), "sink_logits": False, "softcap": False,
                "per_layer_rope": False,
                "partial_rotary": True, "settable_p0": False, "min_window": 1, "max_batch": 64,
                "max_position": MAX_CONTEXT - 1, "profile": PROFILE_F32,
                **({"max_sliding_windows": 1} if VARIANTS[self.variant].get("sink") else {})}

    def unsupported(self, case):
        if case.k_dtype != case.v_dtype or case.k_dtype not in DTYPES:
            return f"K {case.k_dtype}, V {case.v_dtype}: the cache is the model dtype (model.to(dtype))"
        sink = VARIANTS[self.variant].get("sink")
        if sink and len({(lay["window"], lay["sinks"]) for lay in case.layers}) > 1:
            return ("layers of different windows or sink counts (a full-attention layer beside a sliding one "
                    "included): enable_attention_sink gives every layer the one S, W of --use_attention_sink S,W")
        if sink and case.layers[0]["sinks"] + 2 * case.layers[0]["window"] > MAX_CONTEXT:
            lay = case.layers[0]
            return (f"S + 2 W = {lay['sinks'] + 2 * lay['window']}: KVCacheWithAttentionSink allocates S + 2 W slots "
                    f"and RopeWithAttentionSink a table of S + 2 W positions (here at most {MAX_CONTEXT})")
        if not sink and case.max_position() >= MAX_CONTEXT:
            return f"position {case.max_position()}: Rope precomputes max_context_len positions (here at most {MAX_CONTEXT})"
        ropes = {str(sorted(lay["rope"].items())) for lay in case.layers}
        if len(ropes) > 1:
            return "per-layer RoPE: one Rope per model"
        rope = case.layers[0]["rope"]
        if rope["style"] not in ("neox", "gptj") or rope["scaling"] != "none":
            return f"RoPE {rope['style']} / {rope['scaling']}: ExecuTorch's Rope rotates every layer, no linear or NTK scaling"
        if rope.get("rotary_dim") and rope["style"] != "neox":
            return "partial rotary on the Llama (gptj) path: only the HF path has partial_rotary_factor"
        if (any(lay["sinks"] for lay in case.layers) and not sink) or case.sink_logits or case.softcap:
            return "sink tokens (the sink variant has them), sink logits or softcap: AttentionMHA has none"
        if abs(case.scale - 1.0 / np.sqrt(case.D)) > 1e-12:
            return "softmax scale other than 1/sqrt(D)"
        windows = [case.layers[l]["window"] for l in range(case.L) if case.is_sliding(l)]
        longest = max((c.n for step in case.steps for c in step.chunks), default=0)
        if sink:
            S, W = case.layers[0]["sinks"], case.layers[0]["window"]
            for step in case.steps:
                for c in step.chunks:
                    window_tokens = c.n - max(0, min(c.n, S - c.position))
                    if window_tokens > 2 * W:
                        return (f"a chunk of {window_tokens} window tokens with W = {W}: KVCacheWithAttentionSink.update "
                                f"asserts that they fit its ring of 2 W slots")
            return None
        if self.exported and windows and longest > 2 * min(windows):
            return (f"a chunk of {longest} tokens with W = {min(windows)}: the exported program takes chunks of at "
                    f"most max_seq_length - 1 tokens, and a ring of W exports only with max_seq_length <= 2 W + 1 "
                    f"(torch.export: Constraints violated (token_dim), RingKVCache.update's assert on its 2 W slots)")
        if self.exported and longest >= context_length(case):
            return (f"a chunk of {longest} tokens: the exported program takes at most max_seq_length - 1 "
                    f"= {context_length(case) - 1} (max_seq_length <= max_context_length)")
        if windows and longest > 2 * min(windows):
            return (f"a chunk of {longest} tokens with W = {min(windows)}: RingKVCache.update asserts the chunk "
                    f"fits its 2 W slots (AssertionError: Update sequence length({longest}) for kv cache must be "
                    f"smaller than the cache size({2 * min(windows)}))")
        return None

    def profile(self, case):
        return PROFILE_F32 if case.k_dtype == "f32" else low_precision_profile(case.k_dtype)

    def start(self, case):
        self.case = case
        self.models = {}

    def reset(self, seq, p0):
        self.models.pop(seq, None)  # the next chunk starts a new model at p0 (a new runner session)

    def append(self, chunks):
        results = []
        for c in chunks:
            if c.seq not in self.models:
                self.models[c.seq] = self.session() if self.exported else Model(self.case, self.variant, self.bug)
            if self.exported:
                results.append(self.models[c.seq].forward_chunk(hidden_states(c), c.position))
            else:
                results.append(self.models[c.seq].forward_chunk(c))
        return results

    def session(self):
        """pte: a new runtime session (a freshly loaded method) of the case's program, exported once per run."""
        key = program_key(self.case, self.bug)
        if key not in self.programs:
            import pte  # engines/executorch/pte.py: the export and the runtime
            self.programs[key] = pte.Program(Model(self.case, self.variant, self.bug))
        return self.programs[key].session()


def program_key(case, bug):
    """What an exported program depends on: the model's shape, windows, RoPE, dtype and context (and the bug)."""
    return (case.L, case.Hq, case.Hkv, case.D, case.k_dtype, context_length(case), str(sorted(case.layers[0]["rope"].items())),
            tuple(case.layers[l]["window"] if case.is_sliding(l) else 0 for l in range(case.L)), bug)


if __name__ == "__main__":
    main(ExecuTorchRing, __doc__, BUGS)
