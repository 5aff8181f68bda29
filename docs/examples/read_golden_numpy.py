#!/usr/bin/env python3
"""Reads ringkv golden cases with numpy only (docs/golden-format.md): python3 read_golden_numpy.py golden/cases/*.safetensors"""
import json, struct, sys
import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4", "I64": "<i8", "I32": "<i4", "I8": "i1", "U8": "u1"}

def read(path):
    """Returns (metadata: dict of str, tensors: dict name -> numpy array)."""
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])           # header length, little-endian uint64
    header = json.loads(data[8:8 + n])             # trailing padding spaces are valid JSON whitespace
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]             # relative to the buffer after the header
        raw = data[8 + n + begin:8 + n + end]
        tensors[name] = np.frombuffer(raw, dtype=DTYPES[t["dtype"]]).reshape(t["shape"])
    return meta, tensors

if __name__ == "__main__":
    for path in sys.argv[1:]:
        meta, tensors = read(path)
        print(f"{path}\n  case id: {meta['id']}\n  classes: {', '.join(json.loads(meta['classes']))}")
        for name, a in sorted(tensors.items()):
            print(f"  {name:20s} {str(a.dtype):8s} {list(a.shape)}")
