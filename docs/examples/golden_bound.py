#!/usr/bin/env python3
"""The per-output tolerance bound of docs/tolerances.md, computed from a golden case's stored
bound inputs and a declared precision profile: a numpy port of output_bound() in
conformance/support/tolerance.cpp (the C++ function is normative; a CI test checks this port
against it on every committed case).

    meta, t = read_golden_numpy.read(path)
    bound = bounds(meta, t, REFERENCE_PROFILE)     # [L][R][Hq][D], like t["expected_f64"]
    ok = np.abs(out - t["expected_f64"]) <= bound
"""
import json
import math
import numpy as np

UNIT = {"f64": 2.0**-53, "f32": 2.0**-24, "tf32": 2.0**-11, "f16": 2.0**-11, "bf16": 2.0**-8,
        "fp8_e4m3": 2.0**-4, "fp8_e5m2": 2.0**-3, "int8": 0.0}
TINY = {"f64": 0.0, "f32": 2.0**-150, "tf32": 2.0**-150, "f16": 2.0**-25, "bf16": 2.0**-134,  # f64: 2^-1075 = 0.0
        "fp8_e4m3": 2.0**-10, "fp8_e5m2": 2.0**-17, "int8": 0.0}
LAMBDA, SAFETY = 4.0, 2.0

# The reference engine's profile: f32 arithmetic, storage as configured, f64 RoPE angles
# (profiles/f32-reference.json).
REFERENCE_PROFILE = {"q_dot": "f32", "q_quant": "none", "k_storage": "as_configured", "v_storage": "as_configured",
                     "qk_accumulator": "f32", "pv_accumulator": "f32", "p_before_pv": "f32", "output": "f32",
                     "rope_angle": "f64"}
Q8_0_CODE = 1.0 / 254.0 + 2.0**-23  # half a q8_0 code step over max|q|, plus a tie moved by x * (1/d)


def profile_2(profile):
    """A profile dict as golden-format section 5 spells it: profile 1's "accumulator" sets both
    accumulators (the specific keys win), q_quant defaults to "none", storage to "as_configured"."""
    p = {"q_quant": "none", "k_storage": "as_configured", "v_storage": "as_configured"}
    if "accumulator" in profile:
        p["qk_accumulator"] = p["pv_accumulator"] = profile["accumulator"]
    p.update({k: v for k, v in profile.items() if k != "accumulator"})
    return p


def storage_term(config_dtype, declared):
    u = 0.0 if declared in (None, "as_configured", config_dtype) else UNIT[declared]
    return u + (2.0**-22 if config_dtype == "int8" else 0.0)


def k_neighbour_error(k_format, D, u_angle_is_f64, s):
    """Sum_d |q_d| |k^_d - k_d| for K rotated with angles coarser than f64, then stored lossily."""
    if u_angle_is_f64 or k_format["dtype"] == "f32":
        return 0.0 * s["max_abs_dot"]
    if k_format["dtype"] == "int8":
        if k_format["int8_scheme"] in ("static", "static_tensor"):  # not covered (tolerances.md section 9)
            return 0.0 * s["max_abs_dot"]
        return math.sqrt(D) / 127.0 * (1.0 + 2.0**-11) * s["max_qk_norm"]
    return 2.0 * UNIT[k_format["dtype"]] * s["max_abs_dot"]


def bounds(meta, t, profile):
    """Bound of every output, [L][R][Hq][D]. `profile` maps the PrecisionProfile fields to
    precision names (k_storage / v_storage "as_configured" or None: the config's dtypes)."""
    profile = profile_2(profile)
    cfg = json.loads(meta["case"])["config"]
    D = cfg["head_dim"]
    tau = cfg["softmax_scale"] if cfg["softmax_scale"] is not None else 1.0 / math.sqrt(D)
    cap = cfg["softcap"]
    u_qk, u_pv, u_q = UNIT[profile["qk_accumulator"]], UNIT[profile["pv_accumulator"]], UNIT[profile["q_dot"]]
    u_p, u_out, u_ang = UNIT[profile["p_before_pv"]], UNIT[profile["output"]], UNIT[profile["rope_angle"]]
    u_k = storage_term(cfg["k_format"]["dtype"], profile["k_storage"])
    u_v = storage_term(cfg["v_format"]["dtype"], profile["v_storage"])
    s = {k: t["score." + k][..., None] for k in
         ("n_keys", "max_abs_dot", "max_abs_score", "max_tie_dot", "max_qk_norm", "max_angle")}
    rope = np.array([layer["rope"]["style"] != "none" for layer in cfg["layers"]]).reshape(-1, 1, 1, 1)
    # The logit error Delta (docs/tolerances.md section 2).
    delta = tau * (u_q + u_k + LAMBDA * math.sqrt(D + 2.0) * u_qk) * s["max_abs_dot"]
    delta = delta + tau * s["max_tie_dot"]
    if profile["q_quant"] == "q8_0":  # section 2a
        delta = delta + tau * (LAMBDA * Q8_0_CODE * s["max_qk_norm"]
                               + 2.0**-11 * (s["max_abs_dot"] + math.sqrt(32.0) * Q8_0_CODE * s["max_qk_norm"]))
    delta = delta + u_qk * (2.0 * s["max_abs_score"] + 4.0)
    if cap is not None:
        delta = delta + 4.0 * u_qk * cap
    k_flip = k_neighbour_error(cfg["k_format"], D, profile["rope_angle"] == "f64", s)  # section 2b
    delta = delta + np.where(rope, tau * 2.0 * u_ang * (3.0 * s["max_angle"] + 8.0) * s["max_qk_norm"]
                             + tau * k_flip, 0.0)
    # From Delta to the output (section 3).
    sqrt_n = np.sqrt(np.maximum(s["n_keys"], 1.0))
    with np.errstate(over="ignore"):
        grow = np.expm1(2.0 * delta)  # may be +inf (f32 RoPE angles near 2^31)
    e2d = grow + 1.0

    def scaled(a, x):  # a * x, 0 where x is 0 even if a is infinite
        with np.errstate(invalid="ignore", over="ignore"):
            return np.where(x == 0.0, 0.0, a * x)

    b = scaled(grow, t["dim.spread"])
    b = b + scaled(e2d, t["dim.tie_mass"] + u_v * t["dim.abs_mass"])
    n = np.maximum(s["n_keys"], 1.0)

    def stagnation(u):  # the sums' systematic error once terms fall within an ulp of the sum (section 3)
        return np.minimum(1.0, n * u) ** 2

    b = b + scaled(e2d, ((LAMBDA * sqrt_n + 1.0) * u_pv + stagnation(u_pv) + u_p) * t["dim.abs_mass"])
    b = b + ((LAMBDA * sqrt_n + 2.0) * u_qk + stagnation(u_qk) + u_out) * t["dim.abs_out"]
    tiny = max(TINY[profile["qk_accumulator"]], TINY[profile["pv_accumulator"]], TINY[profile["p_before_pv"]])
    b = b + tiny * (s["n_keys"] + 2.0) * (1.0 + t["dim.max_abs_v"]) + TINY[profile["output"]]
    # Cap (docs/tolerances.md section 3): no weighted average of the values is further than
    # max|v| + |o| from the oracle's output; twice that keeps the bound finite.
    cap = SAFETY * (t["dim.max_abs_v"] + t["dim.abs_out"]) + TINY[profile["output"]]
    return np.minimum(SAFETY * b, cap)
