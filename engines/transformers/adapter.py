#!/usr/bin/env python3
"""ringkv adapter for Hugging Face transformers: its real sliding-window caches, masks, RoPE and attention.

    adapter.py GOLDEN_DIR OUT_DIR [--variant dynamic-sdpa|dynamic-eager|static-sdpa|static-eager]
               [--ringkv RINGKV] [--filter REGEX] [--bug window+1|rope-from-slot]
    ringkv check --outputs OUT_DIR --golden GOLDEN_DIR

(the variant can also come from the environment, RINGKV_ENGINE_VARIANT; default dynamic-sdpa, what
`generate` uses.) Nothing of the cache, the mask or RoPE is written here: each case runs through the
objects a transformers model builds, called in the order its forward calls them (MistralModel.forward,
Qwen2Model.forward, Gemma2Model.forward, GptOssModel.forward):

1. a model config with the case's heads, head dim, layers, window and RoPE (no weights are downloaded:
   the config is built here, tiny): Mistral (every layer sliding with one window, or none), Qwen2 (sliding
   layers beside full ones, `layer_types`), Gemma2 (softcap: `attn_logit_softcapping`, softmax scale
   through `query_pre_attn_scalar`), GPT-OSS (learned sink logits: the attention's `sinks` parameter);
   `_attn_implementation` is the variant's (Gemma2 and GPT-OSS declare `_supports_sdpa = False`, so they
   always run eager, as transformers runs them);
2. the cache the model uses: `DynamicCache(config=...)` (DynamicSlidingWindowLayer on sliding layers,
   DynamicLayer on full ones) or `StaticCache(config=..., max_cache_len=max_tokens)`
   (StaticSlidingWindowLayer / StaticLayer); a reset is `cache.reset()` (the object is reused);
3. per forward (one chunk): position_ids (the true positions p0 + index, as a caller passes them), then
   the masks exactly as the model's forward builds them, *before* the cache is updated
   (`create_causal_mask` / `create_sliding_window_causal_mask` with inputs_embeds, the 2D
   attention_mask, past_key_values and position_ids), then the model's rotary embedding class
   (`*RotaryEmbedding(config)(x, position_ids)`, rope_parameters default or linear), then each layer's
   own attention module (`MistralAttention`, `Qwen2Attention`, `Gemma2Attention`, `GptOssAttention`),
   which rotates q and k, updates the cache and attends.

The attention module's projections are chosen so that the case's q, k and v pass through unchanged:
hidden size (Hq + 2 Hkv) D, the hidden state of a token is concat(q, k, v) in the model dtype, q_proj,
k_proj and v_proj are 0/1 selection matrices and o_proj the identity onto the first Hq D columns (biases
zero where the model has them). Exact: every output element is one input element times 1 plus products
with 0, and adding zeros is exact (convention_test.py checks it bit for bit). None of the four models has
a q_norm/k_norm (Gemma 3 and Qwen 3 do; an RMS norm is not invertible, so they are not used). A case's
softmax scale is the module's `scaling` attribute (Gemma2: query_pre_attn_scalar = 1/scale^2).

Batches. A transformers cache holds a batch that advances column by column together. A case whose
schedule is what `generate` does (every sequence appends in every step, the first step's chunks of any
lengths, left padded with a 2D attention_mask of zeros over the padding, every later step the same
number of tokens for all; no resets, no rollbacks) runs as one batch in one cache. Every other case runs
each sequence in a cache of its own (batch 1), as a server without continuous batching would.

Rollback (dynamic caches only; StaticLayer has no crop): as assisted generation does it,
`cache.activate_past_recording()` at the start of a case with rollbacks, and after every forward
`cache.crop(-n)` (n = the tokens rejected, 0 when none) before the next one. An exception from crop that
leaves every layer as it was is a refusal (ringkv.Refused); transformers never refuses (see docs/engines.md, transformers).

An exception inside the engine (a shape mismatch, ...) is not a declaration: the chunk and every later
one of that case get NaN outputs (so the case fails where the engine failed) and the message goes to stderr.

Returned: "out" (o_proj's first Hq D columns), and "k_stored"/"v_stored" read from the cache layers'
keys/values after the update, where every chunk's tokens are still in them (a dynamic sliding layer keeps
W - 1 tokens, a static one W: a longer chunk's first tokens are gone). No transformers object keeps the
rotated q: "q_rot"/"k_rot" are the model's own `apply_rotary_pos_emb` (the function its attention forward
calls) on the same q, k and cos/sin the attention module gets, so ringkv checks RoPE apart from attention.

Not expressible, declared in capabilities.json or per case as unsupported, never emulated here: sink
tokens (transformers 5 has no SinkCache), INT8 and fp8 caches (QuantizedCache refuses sliding layers; its
fp8 backend calibrates the scale on the first chunk), K and V of different dtypes (one model dtype), gptj
and no RoPE, partial rotary and per-layer RoPE (one rope_parameters for the model's layers), NTK scaling
(transformers' "dynamic" NTK rescales theta with the sequence length; spec §8's NTK is static), several
sliding windows (one config.sliding_window).
"""
import os
import sys

import numpy as np
import torch

# The ringkv package of this repository (python/src), ahead of any installed copy.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "src"))
from ringkv.adapter import main  # noqa: E402
from ringkv.errors import Refused  # noqa: E402

import transformers  # noqa: E402
from transformers.cache_utils import DynamicCache, StaticCache  # noqa: E402
from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask  # noqa: E402
from transformers.models.gemma2 import modeling_gemma2 as gemma2  # noqa: E402
from transformers.models.gpt_oss import modeling_gpt_oss as gpt_oss  # noqa: E402
from transformers.models.mistral import modeling_mistral as mistral  # noqa: E402
from transformers.models.qwen2 import modeling_qwen2 as qwen2  # noqa: E402

torch.set_num_threads(1)
transformers.logging.set_verbosity_error()

VARIANTS = ("dynamic-sdpa", "dynamic-eager", "static-sdpa", "static-eager")
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
BUGS = {"window+1": "config.sliding_window = W + 1: one key too many",
        "rope-from-slot": "position_ids from the slot (index mod W) instead of the true position"}

# f32 models: f32 everywhere, RoPE angles in f32 (inv_freq, position_ids.float() * inv_freq, cos and sin
# in f32: *RotaryEmbedding.forward). f16/bf16 models (hidden states, weights and the cache in that dtype):
# cos/sin are cast to the dtype (`cos.to(dtype=x.dtype)`) and the rotation runs in it; eager attention:
# q.k^T and the `* scaling` in the dtype (the scores are rounded to it), softmax in f32
# (`softmax(..., dtype=torch.float32)`) then `.to(query.dtype)` (P in the dtype), P.V and the output in the
# dtype; sdpa on the CPU: f32 sums over dtype inputs, P and the output in the dtype.
PROFILE_F32 = {"q_dot": "f32", "q_quant": "none", "k_storage": "as_configured", "v_storage": "as_configured",
               "qk_accumulator": "f32", "pv_accumulator": "f32", "p_before_pv": "f32", "output": "f32",
               "rope_angle": "f32"}


def low_precision_profile(dt, eager):
    return dict(PROFILE_F32, q_dot=dt, qk_accumulator=dt if eager else "f32", p_before_pv=dt, output=dt,
                rope_angle=dt)


def family_of(case):
    """The transformers model whose attention runs the case: (name, reason it cannot, or None)."""
    if case.softcap and case.sink_logits:
        return None, "softcap and sink logits together: no transformers model has both (Gemma2: softcap; GPT-OSS: sinks)"
    if case.softcap:
        return "gemma2", None
    if case.sink_logits:
        return "gpt_oss", None
    sliding = [case.is_sliding(l) for l in range(case.L)]
    return ("mistral" if all(sliding) or not any(sliding) else "qwen2"), None


FAMILIES = {  # the model's module: its config, attention and rotary classes, its apply_rotary_pos_emb; eager only
    "mistral": (mistral, "MistralConfig", "MistralAttention", "MistralRotaryEmbedding", False),
    "qwen2": (qwen2, "Qwen2Config", "Qwen2Attention", "Qwen2RotaryEmbedding", False),
    "gemma2": (gemma2, "Gemma2Config", "Gemma2Attention", "Gemma2RotaryEmbedding", True),  # _supports_sdpa = False
    "gpt_oss": (gpt_oss, "GptOssConfig", "GptOssAttention", "GptOssRotaryEmbedding", True),  # _supports_sdpa = False
}


def hidden_size(case):
    """(Hq + 2 Hkv) D, rounded up to a multiple of Hq (the configs' validate_architecture wants
    hidden_size % num_attention_heads == 0); the extra columns are zero and no projection reads them."""
    n = (case.Hq + 2 * case.Hkv) * case.D
    return -(-n // case.Hq) * case.Hq


def build_config(case, family, attn, bug):
    """The model config of a case (tiny: only the attention of each layer is built)."""
    W = sorted({lay["window"] for l, lay in enumerate(case.layers) if case.is_sliding(l)})
    window = W[0] + (1 if bug == "window+1" else 0) if W else None
    rp = case.layers[0]["rope"]
    rope = {"rope_type": "default", "rope_theta": float(rp["theta"])}
    if rp["scaling"] == "linear":
        rope = {"rope_type": "linear", "rope_theta": float(rp["theta"]), "factor": float(rp["factor"])}
    Hq, Hkv, D = case.Hq, case.Hkv, case.D
    kw = dict(hidden_size=hidden_size(case), num_attention_heads=Hq, num_key_value_heads=Hkv, head_dim=D,
              num_hidden_layers=case.L, intermediate_size=8, vocab_size=8, max_position_embeddings=2 ** 31,
              rope_parameters=rope, attention_dropout=0.0)
    types = ["sliding_attention" if case.is_sliding(l) else "full_attention" for l in range(case.L)]
    if family == "mistral":
        kw.update(sliding_window=window)
    elif family == "qwen2":
        kw.update(use_sliding_window=True, sliding_window=window, max_window_layers=0, layer_types=types)
    elif family == "gemma2":
        kw.update(sliding_window=window if window else 4096, layer_types=types, attn_logit_softcapping=case.softcap,
                  final_logit_softcapping=None)
    else:
        kw.update(sliding_window=window if window else 4096, layer_types=types, num_local_experts=1,
                  num_experts_per_tok=1, attention_bias=False)
    config = getattr(FAMILIES[family][0], FAMILIES[family][1])(**kw)
    config._attn_implementation = attn
    return config


class Model:
    """One case's transformers objects: config, rotary embedding, one attention module per layer."""

    def __init__(self, case, family, attn, dt, bug):
        module, _, attn_name, rot_name, _ = FAMILIES[family]
        attn_cls, rot_cls = getattr(module, attn_name), getattr(module, rot_name)
        self.apply_rotary = module.apply_rotary_pos_emb  # what the attention module's forward calls
        self.family, self.dt = family, dt
        self.config = build_config(case, family, attn, bug)
        self.rotary = rot_cls(config=self.config)
        Hq, Hkv, D = case.Hq, case.Hkv, case.D
        nq, nk = Hq * D, Hkv * D
        eye = torch.eye(hidden_size(case), dtype=torch.float32)
        self.attn = []
        with torch.no_grad():
            for l in range(case.L):
                a = attn_cls(self.config, layer_idx=l).eval()
                a.q_proj.weight.copy_(eye[:nq])
                a.k_proj.weight.copy_(eye[nq:nq + nk])
                a.v_proj.weight.copy_(eye[nq + nk:nq + 2 * nk])
                a.o_proj.weight.copy_(eye[:, :nq])
                for p in (a.q_proj, a.k_proj, a.v_proj, a.o_proj):
                    if p.bias is not None:
                        p.bias.zero_()
                if family == "gpt_oss":
                    a.sinks.copy_(torch.tensor(case.sink_logits[l], dtype=torch.float32))
                a.scaling = float(case.scale)  # set from the config at init (head_dim ** -0.5, Gemma2:
                # query_pre_attn_scalar ** -0.5 with an int query_pre_attn_scalar); the attention functions get it
                self.attn.append(a.to(dt))
        self.sliding = [case.is_sliding(l) for l in range(case.L)]
        self.types = ["sliding_attention" if s else "full_attention" for s in self.sliding]

    def new_cache(self, max_cache_len, static):
        if static:
            return StaticCache(config=self.config, max_cache_len=max_cache_len)
        return DynamicCache(config=self.config)

    def forward(self, x, attention_mask, position_ids, cache):
        """x [L][B][n][hidden] (model dtype): the layers' hidden states. As the model's forward: masks first
        (before any cache update), then the rotary embedding, then each layer's attention. Returns [L][B][n][hidden]."""
        kw = dict(config=self.config, inputs_embeds=x[0], attention_mask=attention_mask, past_key_values=cache,
                  position_ids=position_ids)
        if self.family == "mistral":  # MistralModel.forward: one mask for every layer
            fn = create_causal_mask if self.config.sliding_window is None else create_sliding_window_causal_mask
            mask = fn(**kw)
            masks = {"sliding_attention": mask, "full_attention": mask}
        else:  # Qwen2Model / Gemma2Model / GptOssModel.forward: a mask per layer type
            masks = {"full_attention": create_causal_mask(**kw)}
            if any(self.sliding):
                masks["sliding_attention"] = create_sliding_window_causal_mask(**kw)
        position_embeddings = self.rotary(x[0], position_ids=position_ids)
        with torch.no_grad():
            out = [a(hidden_states=x[l], position_embeddings=position_embeddings,
                     attention_mask=masks[self.types[l]], past_key_values=cache)[0]
                   for l, a in enumerate(self.attn)]
        return out, position_embeddings

    def rotated(self, q, k, position_embeddings):
        """The rotated q and k the attention module computes: the model's own apply_rotary_pos_emb on the
        same cos/sin (q [B][Hq][n][D], k [B][Hkv][n][D] in the model dtype, as q_proj/k_proj pass them)."""
        cos, sin = position_embeddings
        with torch.no_grad():
            return self.apply_rotary(q, k, cos, sin)


def stored_rows(layer, n):
    """The last n tokens a cache layer holds after an update, [B][Hkv][n][D], or None if they are not all in it."""
    keys, values = layer.keys, layer.values
    if hasattr(layer, "max_cache_len"):  # StaticLayer / StaticSlidingWindowLayer: tokens in [0, min(total, size))
        total = layer.get_seq_length()
        total = int(total.item()) if isinstance(total, torch.Tensor) else int(total)
        end = min(total, layer.max_cache_len)
        if n > end:
            return None
        return keys[:, :, end - n:end], values[:, :, end - n:end]
    if keys is None or keys.shape[-2] < n or n == 0:
        return None
    return keys[:, :, keys.shape[-2] - n:], values[:, :, values.shape[-2] - n:]


class Sequences:
    """The state of one cache: the sequences (batch rows) it holds, their 2D attention mask, and the
    crop owed since the last forward (rollback cases)."""

    def __init__(self, cache, rows):
        self.cache, self.rows = cache, rows
        self.mask = torch.zeros((len(rows), 0), dtype=torch.long)
        self.forwards = 0
        self.cropped = True


class TransformersAttention:
    def __init__(self, bug=None, variant=None):
        self.bug = bug
        self.variant = variant or os.environ.get("RINGKV_ENGINE_VARIANT") or "dynamic-sdpa"
        if self.variant not in VARIANTS:
            raise SystemExit(f"unknown variant {self.variant!r} (one of {', '.join(VARIANTS)})")
        self.static = self.variant.startswith("static")
        self.attn = self.variant.split("-")[1]
        self.name = f"transformers-{transformers.__version__} torch-{torch.__version__.split('+')[0]} ({self.variant}, CPU)"

    def capabilities(self):
        caps = {"k_dtypes": ["f32", "f16", "bf16"], "v_dtypes": ["f32", "f16", "bf16"], "kv_formats_differ": False,
                "int8_schemes": [], "int8_roundings": [], "rope_styles": ["neox"], "rope_scalings": ["none", "linear"],
                "sinks": False, "sink_logits": True, "softcap": True, "per_layer_rope": False,
                "partial_rotary": False, "settable_p0": True, "min_window": 1, "max_sliding_windows": 1,
                "profile": PROFILE_F32}
        if not self.static:  # DynamicCache.crop, as assisted generation calls it
            caps.update(rollback=True, max_rollback_reserve=2 ** 30)
        return caps

    def unsupported(self, case):
        if case.k_dtype != case.v_dtype:
            return f"K {case.k_dtype} and V {case.v_dtype}: a transformers model has one dtype for its cache"
        if case.k_dtype not in DTYPES:
            return f"K/V {case.k_dtype}: QuantizedCache refuses sliding layers (and its fp8 scale is calibrated on the first chunk)"
        family, why = family_of(case)
        if why:
            return why
        rp = [lay["rope"] for lay in case.layers]
        if any(r != rp[0] for r in rp):
            return "per-layer RoPE: one rope_parameters for all of a Mistral/Qwen2/Gemma2/GPT-OSS model's layers"
        if rp[0]["style"] != "neox" or (rp[0]["rotary_dim"] or case.D) != case.D:
            return f"RoPE {rp[0]['style']} over {rp[0]['rotary_dim'] or case.D} of {case.D} dims: these models rotate the whole head, neox pairs"
        if rp[0]["scaling"] not in ("none", "linear"):
            return f"RoPE scaling {rp[0]['scaling']}: transformers' 'dynamic' NTK rescales theta with the sequence length, not spec §8's static NTK"
        if case.D % 2:
            return f"head dim {case.D}: rotate_half needs an even head dim"
        windows = {lay["window"] for l, lay in enumerate(case.layers) if case.is_sliding(l)}
        if len(windows) > 1:
            return f"sliding windows {sorted(windows)}: one config.sliding_window for all sliding layers"
        if any(lay["sinks"] for lay in case.layers):
            return "sink tokens: transformers 5 has no SinkCache"
        try:  # the config class's own validation (strict dataclass validators)
            build_config(case, family, self.attn, self.bug)
        except Exception as e:  # noqa: BLE001 - its message is the reason
            return f"{FAMILIES[family][1]} refuses the config: {type(e).__name__}: {e}".replace("\n", " ")
        return None

    def profile(self, case):
        family, _ = family_of(case)
        eager = self.attn == "eager" or (family is not None and FAMILIES[family][4])
        return PROFILE_F32 if case.k_dtype == "f32" else low_precision_profile(case.k_dtype, eager)

    # --- the replay protocol ---

    def start(self, case):
        self.case = case
        family, _ = family_of(case)
        attn = "eager" if FAMILIES[family][4] else self.attn
        self.model = Model(case, family, attn, DTYPES[case.k_dtype], self.bug)
        self.failed = None  # the engine's exception, once it raised one
        self.record_past = case.requires_rollback
        self.lockstep = lockstep(case)
        self.held = [0] * case.B
        self.p0 = list(case.start_positions)
        # sliding layers keep W - 1 tokens (dynamic) or W (static); a chunk longer cannot be read back whole
        keep = [(lay["window"] - (0 if self.static else 1)) if case.is_sliding(l) else case.max_tokens
                for l, lay in enumerate(case.layers)]
        longest = max(c.n for s in case.steps for c in s.chunks) if case.R else 0
        self.read_stored = not self.record_past and longest <= min(keep)
        if self.lockstep:
            first = case.steps[0].chunks
            self.pad = max(c.n for c in first)
            cols = self.pad + sum(s.chunks[0].n for s in case.steps[1:])
            self.caches = [Sequences(self.model.new_cache(cols, self.static), list(range(case.B)))]
        else:
            self.caches = [self.new_sequence() for _ in range(case.B)]

    def new_sequence(self):
        s = Sequences(self.model.new_cache(self.case.max_tokens, self.static), [0])
        if self.record_past:
            s.cache.activate_past_recording()  # as assisted generation does (generation/utils.py)
        return s

    def reset(self, seq, p0):
        self.p0[seq], self.held[seq] = p0, 0
        if self.failed:
            return
        s = self.caches[seq]
        s.cache.reset()  # the cache object is reused
        s.mask = torch.zeros((1, 0), dtype=torch.long)
        s.forwards, s.cropped = 0, True

    def rollback(self, rollbacks):
        if self.failed:
            return
        for seq, n in rollbacks:
            s = self.caches[seq]
            before = snapshot(s.cache)
            try:
                s.cache.crop(-n)
            except Exception as e:  # noqa: BLE001 - the engine's own refusal, if it changed nothing
                if snapshot(s.cache) == before:
                    raise Refused(f"transformers refused crop({-n}): {e}") from None
                return self.fail(e)
            s.cropped = True
            s.mask = s.mask[:, :s.mask.shape[1] - n]
            self.held[seq] -= n

    def fail(self, e):
        self.failed = f"{type(e).__name__}: {e}"
        print(f"{self.case.name}: transformers raised {self.failed}", file=sys.stderr)

    def append(self, chunks):
        case = self.case
        results = {}
        if self.lockstep:
            groups = [(self.caches[0], chunks)]
        else:
            groups = [(self.caches[c.seq], [c]) for c in chunks]
        for s, group in groups:
            if not self.failed:
                try:
                    results.update(self.run(s, group))
                except Exception as e:  # noqa: BLE001 - an engine failure is reported as NaN outputs
                    self.fail(e)
            for c in group:
                self.held[c.seq] += c.n
        out = []
        for c in chunks:
            if c.seq not in results:
                results[c.seq] = {"out": np.full((case.L, c.n, case.Hq, case.D), np.nan, np.float32)}
            out.append(results[c.seq])
        return out

    def run(self, s, group):
        """One forward of one cache: the group's chunks (one per batch row), left padded to the longest."""
        case, dt = self.case, self.model.dt
        Hq, Hkv, D = case.Hq, case.Hkv, case.D
        if self.record_past and not s.cropped and s.forwards:
            s.cache.crop(0)  # assisted generation crops after every forward, 0 tokens when all were accepted
        width = max(c.n for c in group)
        B = len(group)
        x = np.zeros((case.L, B, width, hidden_size(case)), np.float32)
        positions = np.ones((B, width), np.int64)  # generate's position_ids for padding: 1
        new_mask = np.zeros((B, width), np.int64)
        W = min([lay["window"] for l, lay in enumerate(case.layers) if case.is_sliding(l)] or [case.max_tokens])
        for b, c in enumerate(group):
            pad = width - c.n
            x[:, b, pad:, :(Hq + 2 * Hkv) * D] = np.concatenate([c.q.reshape(case.L, c.n, -1), c.k.reshape(case.L, c.n, -1),
                                            c.v.reshape(case.L, c.n, -1)], axis=-1)
            index = np.arange(c.index, c.index + c.n, dtype=np.int64)
            if self.bug == "rope-from-slot":
                index = index % W
            positions[b, pad:] = self.p0[c.seq] + index
            new_mask[b, pad:] = 1
        s.mask = torch.cat([s.mask, torch.from_numpy(new_mask)], dim=1)
        xt = torch.from_numpy(x).to(dt)
        hidden, position_embeddings = self.model.forward(xt, s.mask, torch.from_numpy(positions), s.cache)
        s.forwards += 1
        s.cropped = False
        # q_rot, k_rot: the model's apply_rotary_pos_emb on the q and k its projections pass ([L][B][H][n][D])
        heads = xt[..., :(Hq + 2 * Hkv) * D].reshape(case.L, B, width, Hq + 2 * Hkv, D).transpose(2, 3)
        rot = [self.model.rotated(heads[l, :, :Hq], heads[l, :, Hq:Hq + Hkv], position_embeddings) for l in range(case.L)]
        results = {}
        for b, c in enumerate(group):
            pad = width - c.n
            o = np.stack([h[b, pad:, :Hq * D].float().numpy() for h in hidden]).reshape(case.L, c.n, Hq, D)
            r = {"out": o,
                 "q_rot": np.stack([q[b, :, pad:].float().numpy().transpose(1, 0, 2) for q, _ in rot]),
                 "k_rot": np.stack([k[b, :, pad:].float().numpy().transpose(1, 0, 2) for _, k in rot])}
            if self.read_stored:
                rows = [stored_rows(layer, c.n) for layer in s.cache.layers]
                if all(rw is not None for rw in rows):
                    r["k_stored"] = np.stack([k[b].float().numpy().transpose(1, 0, 2) for k, _ in rows])
                    r["v_stored"] = np.stack([v[b].float().numpy().transpose(1, 0, 2) for _, v in rows])
                else:
                    raise RuntimeError(f"adapter: a chunk of {c.n} tokens is not all in the cache after its update")
            results[c.seq] = r
        return results


def snapshot(cache):
    """What crop may change, per layer: lengths and the stored tensors' bytes."""
    out = []
    for layer in cache.layers:
        keys = getattr(layer, "keys", None)
        out.append((getattr(layer, "cumulative_length", None) if not isinstance(getattr(layer, "cumulative_length", None), torch.Tensor) else int(layer.cumulative_length),
                    None if keys is None else (tuple(keys.shape), keys.float().numpy().tobytes(), layer.values.float().numpy().tobytes())))
    return out


def lockstep(case):
    """A batch `generate` runs in one cache: every sequence appends in every step, from index 0 in the
    first (any lengths: left padding), then the same number of tokens for all; no resets, no rollbacks."""
    if case.B < 2 or not case.steps:
        return False
    for i, step in enumerate(case.steps):
        if step.rollbacks or step.resets or len(step.chunks) != case.B:
            return False
        if i == 0 and any(c.index != 0 for c in step.chunks):
            return False
        if i > 0 and len({c.n for c in step.chunks}) != 1:
            return False
    return True


def parse_variant():
    """--variant V (removed from argv before ringkv.adapter.main parses it)."""
    argv = sys.argv
    for i, a in enumerate(argv):
        if a == "--variant" and i + 1 < len(argv):
            v = argv[i + 1]
            del argv[i:i + 2]
            return v
        if a.startswith("--variant="):
            del argv[i]
            return a.split("=", 1)[1]
    return None


if __name__ == "__main__":
    variant = parse_variant()
    main(lambda bug: TransformersAttention(bug, variant), __doc__, BUGS)
