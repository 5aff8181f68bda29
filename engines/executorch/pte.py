"""The pte variant of the ExecuTorch adapter: the exported program, run by ExecuTorch's runtime.

adapter.Model builds the eager model (AttentionMHA layers; replace_sdpa_with_custom_op,
replace_kv_cache_with_custom_kv_cache, then replace_kv_cache_with_ring_kv_cache: what export_llama
--use_sdpa_with_kv_cache --local_global_attention installs). Here it goes down ExecuTorch's own export path,
as export_llama_lib._export_llama takes it for XNNPACK (-X --xnnpack-extended-ops):
  LLMEdgeManager(model, example_inputs=(h, {"input_pos": [0]}), enable_dynamic_shape=True)  (its default
  dynamic shapes: the token dimension a Dim of max max_seq_len - 1, input_pos one element)
  .export() .run_canonical_optimizations()
  .to_edge_transform_and_lower([XNNPACK dynamic-quant partitioner, XNNPACK partitioner])
  .to_executorch()  -> the .pte buffer,
and the buffer is run by executorch.runtime.Runtime (Program.load_method("forward"), Method.execute), one
loaded method per sequence (its mutable buffers, the caches and cache positions, are the session's state).

The exported forward is Transformer.forward's with the hidden states given (export_llama's `h` path):
forward(h, {"input_pos": [start]}), h [1, n, L * dim], layer l's hidden states at [l dim, (l + 1) dim) (the
layers are independent, as in the eager variants: each gets its own q, k and v); the frequencies once from
the Rope, then every layer with the same input_pos; the output [1, n, L * Hq D], layer l's attention output
at [l Hq D, (l + 1) Hq D). Nothing of the cache, mask or RoPE is computed here.

Dynamic shapes (export_llama's default, --enable_dynamic_shape): one program serves chunks of 1 to
max_seq_len - 1 tokens. max_seq_len is 2 W + 1 for the smallest sliding window W of the model (the
largest that exports, docs/engines.md, ExecuTorch, finding: RingKVCache.update's assert that a chunk fits
its 2 W slots becomes a guard on the token dimension, and torch.export refuses a Dim whose range exceeds
it), the case's context for a model without sliding layers.
"""
import torch

from executorch.examples.models.llama.rope import Rope  # noqa: F401  (the Rope adapter.Model installs)
from executorch.extension.llm.export.builder import DType, LLMEdgeManager
from executorch.extension.llm.export.partitioner_lib import get_xnnpack_partitioner
from executorch.runtime import Runtime

DTYPE_OVERRIDE = {torch.float32: DType.fp32, torch.float16: DType.fp16, torch.bfloat16: DType.bf16}


def max_seq_len(windows, context):
    """export_llama's --max_seq_length for a model with these layer sizes (0: full): the largest that exports."""
    sliding = [w for w in windows if w]
    return min(2 * min(sliding) + 1, context) if sliding else context


class Forward(torch.nn.Module):
    """What is exported: Transformer.forward(h, attn_options) over adapter.Model's layers."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.dim, self.out = model.args.dim, model.case.Hq * model.case.D

    def forward(self, h, attn_options):
        input_pos = attn_options["input_pos"]
        n = h.size(1)
        rope = self.model.rope
        freqs = rope.get_freqs(input_pos, n)
        outs = []
        for l, block in enumerate(self.model.layers):
            f = freqs
            if self.model.bug == "rope-from-slot" and self.model.windows[l]:
                f = rope.get_freqs(input_pos % self.model.windows[l], n)
            out, _ = block.attention(h[:, :, l * self.dim:(l + 1) * self.dim], f[0], f[1], input_pos=input_pos)
            outs.append(out[:, :, :self.out])
        return torch.cat(outs, dim=-1)


def export(model, seq_len):
    """The .pte buffer of adapter.Model `model` (dynamic token dimension up to seq_len - 1)."""
    dtype = next(model.parameters()).dtype
    n_example = min(3, seq_len - 1)  # export_llama's example prompt is 3 tokens; a Dim of max 2 needs 2
    if n_example < 2:
        raise ValueError(f"max_seq_len {seq_len}: a dynamic token dimension needs at least 2 (export specializes 1)")
    h = torch.zeros(1, n_example, model.case.L * model.args.dim, dtype=dtype)
    manager = LLMEdgeManager(model=Forward(model).eval(), modelname="ringkv", max_seq_len=seq_len, use_kv_cache=True,
                             example_inputs=(h, {"input_pos": torch.tensor([0], dtype=torch.long)}),
                             enable_dynamic_shape=True, dtype=DTYPE_OVERRIDE[dtype],
                             metadata={"get_max_context_len": model.context, "use_sdpa_with_kv_cache": True})
    manager = manager.export()
    manager.run_canonical_optimizations()
    partitioners = [get_xnnpack_partitioner(dynamic_quant_only_partitioner=True),
                    get_xnnpack_partitioner(dynamic_quant_only_partitioner=False)]
    manager = manager.pt2e_quantize(None).to_edge_transform_and_lower(partitioners).to_executorch()
    return manager.export_program.buffer


class Program:
    """One exported program, loaded by the runtime; session() is a fresh method (a new runner session)."""

    def __init__(self, model):
        self.seq_len = max_seq_len(model.windows, model.context)
        self.dim, self.L, self.dtype = model.args.dim, model.case.L, next(model.parameters()).dtype
        self.Hq, self.D = model.case.Hq, model.case.D
        self.buffer = export(model, self.seq_len)
        self.program = Runtime.get().load_program(self.buffer)

    def session(self):
        method = self.program.load_method("forward")
        if method is None:
            raise RuntimeError("the exported program has no method forward")
        return Session(self, method)


class Session:
    def __init__(self, program, method):
        self.program, self.method = program, method

    def forward_chunk(self, x, start):
        """x: [L, n, dim] float32 hidden states of one chunk at position start -> [L, n, Hq, D] float32."""
        p = self.program
        L, n, _ = x.shape
        if not 1 <= n < p.seq_len:
            raise ValueError(f"a chunk of {n} tokens: the program takes 1 to {p.seq_len - 1}")
        h = torch.from_numpy(x).permute(1, 0, 2).reshape(1, n, L * p.dim).to(p.dtype).contiguous()
        (out,) = self.method.execute([h, torch.tensor([start], dtype=torch.long)])
        return out.float().reshape(n, L, p.Hq, p.D).permute(1, 0, 2, 3).numpy()
