"""An engine in numpy implementing ringkv spec 1.1 through the replay protocol (ringkv.replay).

    pytest --ringkv-engine ringkv.examples.numpy_engine:make_engine             # passes
    pytest --ringkv-engine ringkv.examples.numpy_engine:make_window_plus_one    # a planted W+1 window: fails

Each (layer, sequence) has a ring of C = min(S + W + Q, max_tokens) slots (spec §3): token j since the
reset in slot j if j < S, else S + (j - S) mod (C - S). K is rotated in float64 at the token's true
position (spec §8), rounded once to f32 and stored as the config says (spec §10: f16, bf16, fp8, INT8
per_head, q8_0, static); attention is computed in float64 over the slots the window makes visible,
so the engine declares ringkv's default profile (f32 everywhere, f64 RoPE). Rollbacks are honoured or
refused by spec 1.1 §5.1.2's rule over each sequence's high-water mark. With internals=True it also
returns its rotated q/k and its stored cache per row, which ringkv checks on their own (golden-format §7).
"""
import numpy as np

from ..errors import Refused

# ringkv's default precision profile (golden-format §5), declared explicitly.
PROFILE = {"q_dot": "f32", "q_quant": "none", "k_storage": "as_configured", "v_storage": "as_configured",
           "qk_accumulator": "f32", "pv_accumulator": "f32", "p_before_pv": "f32", "output": "f32",
           "rope_angle": "f64"}


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


class Ring:
    """One (layer, sequence) ring: the position each slot holds (-1: empty) and the stored K/V."""

    def __init__(self, capacity, hkv, d, p0):
        self.positions = np.full(capacity, -1)
        self.k = np.zeros((capacity, hkv, d))
        self.v = np.zeros((capacity, hkv, d))
        self.p0 = p0


class NumpyEngine:
    """The replay protocol in numpy. window_error plants a bug: a window (and ring) that many keys too wide."""

    def __init__(self, window_error=0, internals=True):
        self.window_error, self.internals = window_error, internals
        self.name = "numpy-example" + (f" [planted bug window+{window_error}]" if window_error else "")

    def capabilities(self):
        return {"rollback": True, "max_rollback_reserve": 1 << 30, "profile": PROFILE}

    def start(self, case):
        self.case, cfg = case, case.config
        self.held = [0] * case.B                          # tokens each sequence holds
        self.p0 = list(case.start_positions)
        self.high = [[0] * case.B for _ in case.layers]   # high-water mark per layer and sequence (§5.1.2)
        self.rings = [{} for _ in case.layers]            # per layer: sequence -> Ring
        self.tau = cfg["softmax_scale"] or 1.0 / np.sqrt(case.D)

    def reset(self, seq, p0):
        self.held[seq], self.p0[seq] = 0, p0
        for layer, high in zip(self.rings, self.high):
            layer.pop(seq, None)
            high[seq] = 0

    def rollback(self, rollbacks):
        """Spec 1.1 §5.1.2: honoured iff in every sliding layer lo > m - 1 or lo + (C - S) >= H."""
        case = self.case
        for seq, n in rollbacks:
            m = self.held[seq] - n
            for l, layer in enumerate(case.layers):
                W, S = layer["window"], layer["sinks"]
                if W >= case.max_tokens:  # a global layer never refuses
                    continue
                lo = max(S, m - W + 1)
                if not (lo > m - 1 or lo + (case.capacity(l) - S) >= self.high[l][seq]):
                    raise Refused(f"sequence {seq} to {m} tokens: layer {l} no longer holds key {lo}")
        for seq, n in rollbacks:
            self.held[seq] -= n
            for l, layer in enumerate(case.layers):
                if self.held[seq] <= layer["sinks"]:
                    self.high[l][seq] = self.held[seq]
                ring = self.rings[l].get(seq)
                if ring is not None:  # removed tokens' slots become empty (§5.1.6)
                    ring.positions[ring.positions >= ring.p0 + self.held[seq]] = -1

    def append(self, chunks):
        return [self._append(chunk) for chunk in chunks]

    def _append(self, chunk):
        case, cfg, seq = self.case, self.case.config, chunk.seq
        L, n, Hq, Hkv, D = case.L, chunk.n, case.Hq, case.Hkv, case.D
        out = np.zeros((L, n, Hq, D), np.float32)
        result = {"out": out, "q_rot": np.zeros((L, n, Hq, D), np.float32),
                  "k_rot": np.zeros((L, n, Hkv, D), np.float32),
                  "k_stored": np.zeros((L, n, Hkv, D), np.float32), "v_stored": np.zeros((L, n, Hkv, D), np.float32)}
        first = self.held[seq]
        for i in range(n):
            index = first + i
            pos = self.p0[seq] + index
            for l, layer in enumerate(case.layers):
                W, S = layer["window"] + self.window_error, layer["sinks"]
                C = case.capacity(l) + self.window_error
                if index == 0:  # a fresh or reset sequence: nothing of the previous occupant
                    self.rings[l][seq] = Ring(C, Hkv, D, pos)
                ring = self.rings[l][seq]
                slot = index if index < S else S + (index - S) % (C - S)
                k_rot = rope(chunk.k[l, i], pos, layer["rope"], D).astype(np.float32)
                result["k_rot"][l, i] = k_rot
                for h in range(Hkv):
                    for kv, x, cache in (("k", k_rot[h], ring.k), ("v", chunk.v[l, i, h].astype(np.float32), ring.v)):
                        value, codes, scales = store(x, cfg[kv + "_format"])
                        cache[slot, h] = value
                        result[kv + "_stored"][l, i, h] = value
                        if codes is not None:  # INT8: the codes, and the scales where the scheme stores them
                            result.setdefault(kv + "_codes", np.zeros((L, n, Hkv, D), np.int8))[l, i, h] = codes
                            if len(scales):
                                shape = (L, n, Hkv, len(scales))
                                result.setdefault(kv + "_scales", np.zeros(shape, np.float32))[l, i, h] = scales
                ring.positions[slot] = pos
                j = ring.positions - ring.p0
                visible = (ring.positions >= 0) & (j <= index) & ((j < S) | (j > index - W))
                q_rot = rope(chunk.q[l, i], pos, layer["rope"], D)
                result["q_rot"][l, i] = q_rot.astype(np.float32)
                for h in range(Hq):
                    g = h // (Hq // Hkv)
                    s = self.tau * (ring.k[visible, g] @ q_rot[h])
                    if cfg["softcap"]:
                        s = cfg["softcap"] * np.tanh(s / cfg["softcap"])
                    sink = cfg["sink_logits"][l][h] if cfg["sink_logits"] else None
                    m = max(list(s) + ([sink] if sink is not None else []))
                    p = np.exp(s - m)
                    denom = p.sum() + (np.exp(sink - m) if sink is not None else 0.0)
                    out[l, i, h] = (p / denom) @ ring.v[visible, g]
            self.held[seq] = index + 1
            for high in self.high:
                high[seq] = max(high[seq], self.held[seq])
        return result if self.internals else {"out": out}


def make_engine():
    """The engine as written: it passes every golden case."""
    return NumpyEngine()


def make_window_plus_one():
    """The same engine with a planted off-by-one window (W + 1 keys): ringkv must fail it."""
    return NumpyEngine(window_error=1)
