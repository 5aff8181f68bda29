#!/usr/bin/env python3
"""Reads ringkv golden cases with the `safetensors` package (pip install numpy safetensors):
python3 read_golden_safetensors.py golden/cases/*.safetensors"""
import json, sys
from safetensors import safe_open
from safetensors.numpy import load_file

def read(path):
    """Returns (metadata: dict of str, tensors: dict name -> numpy array)."""
    tensors = load_file(path)                      # every tensor, as numpy arrays
    with safe_open(path, framework="numpy") as f:  # the __metadata__ strings
        meta = f.metadata()
    return meta, tensors

if __name__ == "__main__":
    for path in sys.argv[1:]:
        meta, tensors = read(path)
        case = json.loads(meta["case"])            # config, schedule, seed (docs/golden-format.md)
        cfg = case["config"]
        print(f"{path}\n  case id: {meta['id']}")
        print(f"  layers {len(cfg['layers'])}, Hq {cfg['num_q_heads']}, Hkv {cfg['num_kv_heads']}, "
              f"D {cfg['head_dim']}, batch {cfg['batch']}, steps {len(case['steps'])}")
        for name, a in sorted(tensors.items()):
            print(f"  {name:20s} {str(a.dtype):8s} {list(a.shape)}")
