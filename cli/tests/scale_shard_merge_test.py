#!/usr/bin/env python3
"""ctest cli.scale_shard_merge_same_as_unsharded (issue 28 item 4): the scale cases of a tier are items of
the work list like golden cases, so `ringkv check --scale ci --shard I/N` as N processes, merged by
`ringkv report merge`, gives the unsharded run's JSON report (timings masked) and exit code, at N = 1 and
3 (the two small batched ci cases on the reference, and a golden case beside them, so shards mix kinds).

usage: scale_shard_merge_test.py RINGKV WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_mask import masked  # noqa: E402

ringkv, work = sys.argv[1:3]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
ARGS = ["check", "--quiet", "--engine", "reference", "--scale", "ci", "--filter", "b32|d256|^decode_w8 "]


def run(args, rc):
    proc = subprocess.run([ringkv, *args], capture_output=True, text=True, timeout=900)
    if proc.returncode != rc:
        sys.exit(f"FAILED: ringkv {' '.join(args)} exited {proc.returncode}, expected {rc}\n{proc.stdout}{proc.stderr}")
    return proc


def comparable(path):
    report = masked(path)
    del report["shard"]  # the header names the shard; merge rewrites it as 1 of 1
    return report


whole = os.path.join(work, "whole.json")
run([*ARGS, "--json", whole], 0)
expected = comparable(whole)
names = sorted(c["name"] for c in expected["cases"])
if names != ["decode_w8", "scale/ci/gqa32x8_d256_b8_fp8_softcap", "scale/ci/gqa64x8_d128_b32_q8_0_sinks_drafts"]:
    sys.exit(f"FAILED: the unsharded run's cases are {names}")
for n in (1, 3):
    shards = []
    for i in range(1, n + 1):
        shards.append(os.path.join(work, f"n{n}-shard{i}.json"))
        run([*ARGS, "--shard", f"{i}/{n}", "--json", shards[-1]], 0)
    merged = os.path.join(work, f"n{n}-merged.json")
    run(["report", "merge", *shards, "--json", merged], 0)
    got = comparable(merged)
    if got != expected:
        differ = [k for k in expected if expected.get(k) != got.get(k)]
        sys.exit(f"FAILED: N = {n}: the merged report differs from the unsharded one in {differ}")
    kinds = {w["kind"] for w in json.load(open(merged))["shard"]["work"]}
    if kinds != {"golden", "scale"}:
        sys.exit(f"FAILED: N = {n}: the work list's kinds are {kinds}")
print("scale shards merged give the unsharded report at N = 1 and 3")
