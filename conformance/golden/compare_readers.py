#!/usr/bin/env python3
"""CI check: the numpy-only reader and the `safetensors` package read every committed golden
case identically (names, dtypes, shapes, bytes, metadata), the files match the manifest's
sha256, the layouts match the case JSON, and the numpy port of the bound (golden_bound.py)
agrees with the C++ output_bound() (via `ringkv_golden_tool bounds`).

usage: compare_readers.py GOLDEN_DIR EXAMPLES_DIR [RINGKV_GOLDEN_TOOL]"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

golden_dir, examples = sys.argv[1], sys.argv[2]
tool = sys.argv[3] if len(sys.argv) > 3 else None
sys.path.insert(0, examples)
import golden_bound  # noqa: E402
import read_golden_numpy  # noqa: E402
import read_golden_safetensors  # noqa: E402

F16_ENGINE = dict(golden_bound.REFERENCE_PROFILE, q_dot="f16", p_before_pv="f16", output="f16")
# Profile 1 as outputs files written before profile 2 spell it (one "accumulator", storage explicit).
PROFILE_1 = {"q_dot": "f16", "k_storage": None, "v_storage": None, "accumulator": "f16", "p_before_pv": "f32",
             "output": "f32", "rope_angle": "f64"}
# Every named profile of profiles/ (each file's default profile; classes resolve in C++ only).
NAMED = {}
for f in sorted(os.listdir(os.path.join(examples, "..", "..", "profiles"))):
    if f.endswith(".json"):
        NAMED[f[:-5]] = json.load(open(os.path.join(examples, "..", "..", "profiles", f)))["profile"]
assert {"f32-reference", "f16-pv-accumulation", "q8_0-dot", "f32-rope-angles"} <= set(NAMED), sorted(NAMED)
PROFILES = [golden_bound.REFERENCE_PROFILE, F16_ENGINE, PROFILE_1] + list(NAMED.values())


def profile_json(p, cfg):
    q = dict(p)
    for side in ("k", "v"):  # an explicit dtype where the profile says "as configured" (None)
        if q[side + "_storage"] is None:
            q[side + "_storage"] = cfg[side + "_format"]["dtype"]
    return json.dumps(q)


manifest = json.load(open(os.path.join(golden_dir, "manifest.json")))
assert manifest["format"] == "ringkv-golden-manifest", manifest["format"]
failures, tensors_compared, bounds_compared = [], 0, 0
for entry in manifest["cases"]:
    path = os.path.join(golden_dir, entry["file"])
    name = entry["name"]
    try:
        data = open(path, "rb").read()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], "sha256 differs from the manifest"
        assert len(data) == entry["bytes"], "size differs from the manifest"
        meta_n, t_n = read_golden_numpy.read(path)
        meta_s, t_s = read_golden_safetensors.read(path)
        assert meta_n == meta_s, "metadata differ"
        assert meta_n["format"] == "ringkv-golden" and meta_n["golden_format_version"] in ("1", "2")
        v2 = meta_n["golden_format_version"] == "2"
        assert ("requires" in entry) == v2, "the manifest's requires and the file's version disagree"
        assert meta_n["spec_version"] == ("1.1" if v2 else "1")
        assert meta_n["id"] == entry["id"] and meta_n["name"] == name
        assert json.loads(meta_n["classes"]) == entry["classes"]
        assert sorted(t_n) == sorted(t_s), f"tensor names differ: {sorted(t_n)} vs {sorted(t_s)}"
        for k in t_n:
            a, b = t_n[k], t_s[k]
            assert a.dtype == b.dtype, f"{k}: dtype {a.dtype} vs {b.dtype}"
            assert a.shape == b.shape, f"{k}: shape {a.shape} vs {b.shape}"
            assert a.tobytes() == b.tobytes(), f"{k}: values differ"
            tensors_compared += 1
        # Layout against the case JSON.
        case = json.loads(meta_n["case"])
        cfg = case["config"]
        L, Hq, Hkv, D = len(cfg["layers"]), cfg["num_q_heads"], cfg["num_kv_heads"], cfg["head_dim"]
        R = sum(sum(s["tokens"]) for s in case["steps"])
        assert t_n["q"].shape == (L, R, Hq, D), f"q shape {t_n['q'].shape}"
        assert t_n["k"].shape == (L, R, Hkv, D) and t_n["v"].shape == (L, R, Hkv, D)
        assert t_n["expected_f64"].shape == (L, R, Hq, D) and t_n["score.n_keys"].shape == (L, R, Hq)
        assert (t_n["schedule"] == np.array([s["tokens"] for s in case["steps"]], dtype=np.int32)).all()
        assert (t_n["chunks"][:, 3] > 0).all() and t_n["chunks"][:, 3].sum() == R
        # Format 2: the rollbacks as in the case JSON, one refused flag per step, refused steps append nothing.
        rbs = [[i, r["sequence"], r["n_tokens"], r["stream"]] for i, s in enumerate(case["steps"]) for r in s.get("rollbacks", [])]
        assert ("rollbacks" in t_n) == bool(rbs) == v2 and ("refused" in t_n) == v2
        if v2:
            assert (t_n["rollbacks"] == np.array(rbs, dtype=np.int64).reshape(-1, 4)).all()
            assert t_n["refused"].shape == (len(case["steps"]),) and set(np.unique(t_n["refused"])) <= {0, 1}
            for st in np.nonzero(t_n["refused"])[0]:
                assert sum(case["steps"][st]["tokens"]) == 0 and st not in t_n["chunks"][:, 0]
        for c in t_n["chunks"]:  # a chunk's rows are contiguous and belong to its step and sequence
            rows = t_n["rows"][c[2]:c[2] + c[3]]
            assert (rows[:, 0] == c[0]).all() and (rows[:, 1] == c[1]).all()
            assert (np.diff(rows[:, 2]) == 1).all()
        # The bound: numpy port against the C++ function, under every named profile and profile 1.
        ref_bound = golden_bound.bounds(meta_n, t_n, golden_bound.REFERENCE_PROFILE)
        err = np.abs(t_n["expected"].astype(np.float64) - t_n["expected_f64"])
        assert (err <= ref_bound).all(), "expected (f32) is outside the reference bound of expected_f64"
        if tool:
            for profile in PROFILES:
                with tempfile.TemporaryDirectory() as tmp:
                    out = os.path.join(tmp, "bound.safetensors")
                    subprocess.run([tool, "bounds", path, out, profile_json(profile, cfg)], check=True)
                    cpp = read_golden_numpy.read(out)[1]["bound"]
                py = golden_bound.bounds(meta_n, t_n, profile)
                np.testing.assert_allclose(py, cpp, rtol=1e-12, atol=0, err_msg=f"bound port, profile {profile}")
                bounds_compared += py.size
    except Exception as e:  # report every case, then fail
        failures.append(f"{name}: {type(e).__name__}: {e}")

# File-exchange interop: an outputs file written by the `safetensors` package is read by ringkv.
if tool:
    from safetensors.numpy import save_file
    entry = manifest["cases"][0]
    path = os.path.join(golden_dir, entry["file"])
    meta, t = read_golden_numpy.read(path)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.safetensors")
        save_file({"out": t["expected"].copy()}, out, metadata={"format": "ringkv-golden-outputs", "id": meta["id"],
                                                                "engine": "numpy (expected values)"})
        good = subprocess.run([tool, "check-outputs", path, out], capture_output=True, text=True)
        if good.returncode != 0:
            failures.append(f"outputs file written by safetensors rejected: {good.stdout}{good.stderr}")
        bad = t["expected"].copy()
        bad[0, -1, 0, 0] += 0.5
        save_file({"out": bad}, out, metadata={"id": meta["id"]})
        r = subprocess.run([tool, "check-outputs", path, out], capture_output=True, text=True)
        if r.returncode != 1 or "FAILED" not in r.stdout:
            failures.append(f"a wrong output passed check-outputs: {r.stdout}{r.stderr}")
        else:
            print("file exchange: outputs written by safetensors are read by ringkv; a wrong one is reported:",
                  r.stdout.strip().splitlines()[-1].strip()[:160])

print(f"{len(manifest['cases'])} cases, {tensors_compared} tensors read identically by numpy and safetensors, "
      f"{bounds_compared} bounds equal to the C++ ones")
for f in failures:
    print("FAILED", f)
sys.exit(1 if failures else 0)
