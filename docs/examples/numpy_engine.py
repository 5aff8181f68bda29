#!/usr/bin/env python3
"""An example engine in numpy, checked by `ringkv check --outputs` (file exchange).

It reads each golden case's inputs (docs/golden-format.md), runs its own ring
KV cache implementation of ringkv spec 1 (docs/spec.md), and writes one outputs
file per case: tensor "out", F32, [L][R][Hq][D], the layout of "expected".

    python3 numpy_engine.py GOLDEN_DIR OUT_DIR [--bug window+1] [--write-internals]
    ringkv check --outputs OUT_DIR --golden GOLDEN_DIR

It computes in float64 (K rotated in f64, rounded once to f32, then stored as
the config says), so it declares the default profile (f32 everywhere, f64 RoPE).
--bug plants an off-by-one window, which `ringkv check` must catch.
--write-internals also writes its rotated q and k ("q_rot", "k_rot") and its
stored cache per row ("k_stored", "v_stored", and for INT8 "*_codes" and
"*_scales"), which ringkv checks on their own (golden-format §7).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

DTYPES = {"F64": np.float64, "F32": np.float32, "I64": np.int64, "I32": np.int32, "I8": np.int8, "U8": np.uint8}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        tensors[name] = np.frombuffer(data[base + b:base + e], dtype=DTYPES[t["dtype"]]).reshape(t["shape"])
    return meta, tensors


def write_safetensors(path, tensors, meta):
    header, blobs, offset = {"__metadata__": meta}, [], 0
    names = {np.dtype(t): n for n, t in DTYPES.items()}
    for name in sorted(tensors):
        blob = np.ascontiguousarray(tensors[name]).tobytes()
        header[name] = {"dtype": names[tensors[name].dtype], "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


# ---- storage formats (spec §10) ----
def fp8_table(mbits, bias, finite):
    vals = []
    for c in range(finite):
        e, m = c >> mbits, c & ((1 << mbits) - 1)
        vals.append(np.ldexp(m, 1 - bias - mbits) if e == 0 else np.ldexp((1 << mbits) + m, e - bias - mbits))
    return np.array(vals)


FP8 = {"fp8_e4m3": fp8_table(3, 7, 0x7F), "fp8_e5m2": fp8_table(2, 15, 0x7C)}


def round_fp8(x, table):
    a = np.abs(x.astype(np.float64))
    hi = np.clip(np.searchsorted(table, a, side="right"), 1, len(table) - 1)
    lo = hi - 1
    mid = (table[lo] + table[hi]) / 2
    pick = np.where(a < mid, lo, np.where(a > mid, hi, np.where(lo % 2 == 0, lo, hi)))
    pick = np.where(a >= table[-1], len(table) - 1, np.where(a == table[lo], lo, pick))
    return np.copysign(table[pick], x).astype(np.float32)


def round_code(r, rounding):
    r = r.astype(np.float64)
    q = np.rint(r) if rounding == "rne" else np.sign(r) * np.floor(np.abs(r) + 0.5)
    return np.clip(q, -127, 127)


def store(x, fmt):
    """What the spec stores for one row x (f32, [D]): (decoded value, INT8 codes or None, INT8 scales or None)."""
    d = fmt["dtype"]
    if d == "f32":
        return x, None, None
    if d == "f16":
        return x.astype(np.float16).astype(np.float32), None, None
    if d == "bf16":
        u = x.view(np.uint32).astype(np.uint64)
        return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32), None, None
    s = np.float32(fmt["scale"])
    if d in FP8:
        return (round_fp8(x / s, FP8[d]) * s).astype(np.float32), None, None
    scheme, rounding = fmt["int8_scheme"], fmt["rounding"]
    if scheme == "static":
        codes = round_code(x * (np.float32(1) / s), rounding)
        return (codes.astype(np.float32) * s).astype(np.float32), codes.astype(np.int8), np.zeros(0, np.float32)
    g = 32 if scheme == "q8_0" else len(x)
    out, all_codes, scales = np.empty_like(x), np.zeros(len(x), np.int8), []
    for i in range(0, len(x), g):
        xs = x[i:i + g]
        scale = np.float32(np.max(np.abs(xs))) / np.float32(127)
        if scale == 0 or (scheme == "q8_0" and np.isinf(np.float32(1) / scale)):
            out[i:i + g] = 0
            scales.append(np.float32(0))
            continue
        if scheme == "q8_0":
            codes = round_code(xs * (np.float32(1) / scale), rounding)
            scale = np.float32(np.float16(scale))
        else:
            codes = round_code(xs / scale, rounding)
        out[i:i + g] = (codes.astype(np.float32) * scale).astype(np.float32)
        all_codes[i:i + g] = codes.astype(np.int8)
        scales.append(scale)
    return out, all_codes, np.array(scales, np.float32)


# ---- RoPE from true positions (spec §8) ----
def rope(x, pos, r, head_dim):
    if r["style"] == "none":
        return x.astype(np.float64)
    R = r["rotary_dim"] or head_dim
    theta = r["theta"] * (r["factor"] ** (R / (R - 2)) if r["scaling"] == "ntk" else 1.0)
    p = pos / r["factor"] if r["scaling"] == "linear" else float(pos)
    k = np.arange(R // 2)
    ang = p * np.power(theta, -(2.0 * k) / R)
    c, s = np.cos(ang), np.sin(ang)
    a_idx, b_idx = (k, k + R // 2) if r["style"] == "neox" else (2 * k, 2 * k + 1)
    out = x.astype(np.float64).copy()
    a, b = out[..., a_idx].copy(), out[..., b_idx].copy()
    out[..., a_idx] = a * c - b * s
    out[..., b_idx] = a * s + b * c
    return out


def refused_steps(cfg, t):
    """Spec 1.1 §5.1.2: the steps whose rollbacks this engine refuses, by the honour rule over each
    sequence's high-water mark H per sliding layer (golden format 2; none for a format 1 case)."""
    if "rollbacks" not in t:
        return []
    B, T = cfg["batch"], cfg["max_tokens"]
    held, high, refused = [0] * B, [[0] * B for _ in cfg["layers"]], []
    resets = t["resets"] if "resets" in t else np.zeros((0, 4), np.int64)
    for st, tokens in enumerate(t["schedule"]):
        rolls = [(int(seq), int(n)) for s, seq, n, _ in t["rollbacks"] if s == st]
        ok = True
        for seq, n in rolls:
            m = held[seq] - n
            for l, layer in enumerate(cfg["layers"]):
                W, S = layer["window"], layer["sinks"]
                if W >= T:  # a global layer never refuses
                    continue
                C = min(S + W + layer.get("rollback_reserve", 0), T)
                lo = max(S, m - W + 1)
                ok = ok and (lo > m - 1 or lo + (C - S) >= high[l][seq])
        if not ok:
            refused.append(st)  # the whole step changes nothing
            continue
        for seq, n in rolls:
            held[seq] -= n
            for l, layer in enumerate(cfg["layers"]):
                if held[seq] <= layer["sinks"]:
                    high[l][seq] = held[seq]
        for s, seq, _, _ in resets:
            if s == st:
                held[seq] = 0
                for h in high:
                    h[seq] = 0
        for seq, n in enumerate(tokens):
            held[seq] += int(n)
            for h in high:
                h[seq] = max(h[seq], held[seq])
    return refused


def run_case(meta, t, bug):
    """Returns the outputs file's tensors: "out", and the internals (rotated q/k, stored cache per row),
    and "refused_steps", the steps it refused (golden format 2: spec 1.1 rollbacks)."""
    case = json.loads(meta["case"])
    cfg = case["config"]
    refused = refused_steps(cfg, t)
    # The honoured rollbacks per step (golden-format §12): applied before the step's rows.
    rollbacks = {}
    for s, seq, n, _ in (t["rollbacks"] if "rollbacks" in t else []):
        if int(s) not in refused:
            rollbacks.setdefault(int(s), []).append((int(seq), int(n)))
    L, Hq, Hkv, D = len(cfg["layers"]), cfg["num_q_heads"], cfg["num_kv_heads"], cfg["head_dim"]
    tau = cfg["softmax_scale"] or 1.0 / np.sqrt(D)
    cap = cfg["softcap"]
    rows, positions = t["rows"], t["positions"]
    out = np.zeros(t["expected"].shape, dtype=np.float32)
    tensors = {"out": out, "q_rot": np.zeros(t["q"].shape, np.float32), "k_rot": np.zeros(t["k"].shape, np.float32),
               "k_stored": np.zeros(t["k"].shape, np.float32), "v_stored": np.zeros(t["v"].shape, np.float32)}
    for l, layer in enumerate(cfg["layers"]):
        W, S = layer["window"] + (1 if bug == "window+1" else 0), layer["sinks"]
        C = min(layer["sinks"] + layer["window"] + layer.get("rollback_reserve", 0), cfg["max_tokens"])
        C += 1 if bug == "window+1" else 0
        rings = {}  # sequence -> (slot positions, K, V, p0)
        next_step, held = 0, {}  # rollbacks of the steps before next_step are applied; tokens held
        for r, (step, seq, index, stream) in enumerate(rows):
            for st in range(next_step, step + 1):  # rollbacks come first in their step (spec 1.1 §5)
                for s_, n in rollbacks.get(st, []):
                    held[s_] -= n
                    slots_, _, _, p0_ = rings[s_]
                    slots_[slots_ >= p0_ + held[s_]] = -1  # removed tokens' slots become empty (§5.1.6)
            next_step = step + 1
            held[seq] = index + 1
            pos = int(positions[r])
            if index == 0:  # a fresh or reset sequence: nothing of the previous occupant
                rings[seq] = (np.full(C, -1), np.zeros((C, Hkv, D)), np.zeros((C, Hkv, D)), pos)
            slots, K, V, p0 = rings[seq]
            slot = index if index < S else S + (index - S) % (C - S)
            k_rot = rope(t["k"][l, r], pos, layer["rope"], D).astype(np.float32)
            tensors["k_rot"][l, r] = k_rot
            for h in range(Hkv):
                for kv, x, cache in (("k", k_rot[h], K), ("v", t["v"][l, r, h].astype(np.float32), V)):
                    value, codes, scales = store(x, cfg[kv + "_format"])
                    cache[slot, h] = value
                    tensors[kv + "_stored"][l, r, h] = value
                    if codes is not None:  # INT8: the codes, and the scales where the scheme stores them
                        tensors.setdefault(kv + "_codes", np.zeros(t[kv].shape, np.int8))[l, r, h] = codes
                        if len(scales):
                            shape = t[kv].shape[:3] + (len(scales),)
                            tensors.setdefault(kv + "_scales", np.zeros(shape, np.float32))[l, r, h] = scales
            slots[slot] = pos
            j = slots - p0
            visible = (slots >= 0) & (j <= index) & ((j < S) | (j > index - W))
            q_rot = rope(t["q"][l, r], pos, layer["rope"], D)
            tensors["q_rot"][l, r] = q_rot.astype(np.float32)
            for h in range(Hq):
                g = h // (Hq // Hkv)
                s = tau * (K[visible, g] @ q_rot[h])
                if cap:
                    s = cap * np.tanh(s / cap)
                logits = list(s) + ([cfg["sink_logits"][l][h]] if cfg["sink_logits"] else [])
                m = max(logits)
                p = np.exp(s - m)
                denom = p.sum() + (np.exp(cfg["sink_logits"][l][h] - m) if cfg["sink_logits"] else 0.0)
                out[l, r, h] = (p / denom) @ V[visible, g]
    tensors["refused_steps"] = refused
    return tensors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("golden")
    ap.add_argument("out")
    ap.add_argument("--bug", choices=["window+1"], help="plant a bug that ringkv check must catch")
    ap.add_argument("--write-internals", action="store_true",
                    help="also write q_rot, k_rot and the stored cache per row (golden-format §7)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    manifest = json.load(open(os.path.join(args.golden, "manifest.json")))
    for c in manifest["cases"]:
        meta, t = read_safetensors(os.path.join(args.golden, c["file"]))
        tensors = run_case(meta, t, args.bug)
        refused = tensors.pop("refused_steps")
        if not args.write_internals:
            tensors = {"out": tensors["out"]}
        outputs_meta = {"format": "ringkv-golden-outputs", "name": meta["name"], "id": meta["id"],
                        "engine": "numpy-example" + ("-bug-" + args.bug if args.bug else "")}
        if refused:  # golden format 2: the steps it refused (spec 1.1 §5.1.4)
            outputs_meta["refused_steps"] = json.dumps(refused)
        write_safetensors(os.path.join(args.out, c["name"] + ".safetensors"), tensors, outputs_meta)
        print(c["name"], file=sys.stderr)


if __name__ == "__main__":
    main()
