#!/usr/bin/env python3
"""ctest cli.fleet_ray_local (issue 28 item 3): `python -m ringkv.fleet` on a local Ray cluster.

- 3 shards of the reference and cuda-plan (golden cases and properties), the Ray worker of shard 2
  killed mid-run: the shard is retried, and the merged JSON is the unsharded run's (timings masked),
  exit 0;
- a failing engine (a mutant plugin) in 2 shards, shard 1's ringkv process killed (as the OOM killer
  would): retried; exit 1, each failure printed with its reproduce line, the merged JSON the
  unsharded run's;
- no retries left (--max-retries 0) and a worker killed: no verdict, exit 2 naming the shard.

Needs Ray (python/fleet-requirements.txt, installed into .venv by scripts/install-engines.sh): without it
this test FAILS with that instruction.

usage: fleet_ray_test.py RINGKV MUTANT_PLUGIN WORK_DIR SOURCE_DIR   (run by the .venv's python)
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_mask import masked  # noqa: E402

ringkv, mutant, work, source = sys.argv[1:5]
try:
    import ray  # noqa: F401
except ImportError:
    sys.exit("FAILED: Ray is not installed in this python: ./scripts/install-engines.sh "
             "(pip install -r python/fleet-requirements.txt)")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []
env = {**os.environ, "PYTHONPATH": os.path.join(source, "python", "src"), "RAY_USAGE_STATS_ENABLED": "0"}



def fleet(name, shards, check_args, fault=None, extra=()):
    marker = os.path.join(work, f"{name}.fault")
    e = dict(env)
    if fault:
        e["RINGKV_FLEET_FAULT"] = f"{fault}:{marker}"
    cmd = [sys.executable, "-m", "ringkv.fleet", "--shards", str(shards), "--ringkv", ringkv, "--out",
           os.path.join(work, name), "--json", os.path.join(work, name + ".json"), *extra, "--", *check_args]
    proc = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=600, cwd=work)
    return proc, marker


def unsharded(name, rc, check_args):
    out = os.path.join(work, name + "-whole.json")
    proc = subprocess.run([ringkv, "check", "--quiet", *check_args, "--json", out], capture_output=True, text=True)
    if proc.returncode != rc:
        sys.exit(f"FAILED: the unsharded {name} run exited {proc.returncode}, expected {rc}\n{proc.stdout}{proc.stderr}")
    return masked(out)


args = ["--engine", "reference", "--engine", "cuda-plan", "--properties", "--cases", "5"]
whole = unsharded("passing", 0, args)
proc, marker = fleet("passing", 3, args, fault="kill-worker:2")
text = proc.stdout + proc.stderr
if proc.returncode != 0:
    failures.append(f"passing: exit {proc.returncode}, expected 0\n{text}")
elif masked(os.path.join(work, "passing.json")) != whole:
    failures.append("passing: the merged JSON differs from the unsharded run's")
if not os.path.exists(marker):
    failures.append("passing: shard 2's worker was never killed (no fault marker)")
if not re.search(r"\[fleet\] shard 2/3: exit 0, [0-9]+ golden cases", text):
    failures.append(f"passing: no progress line for the retried shard 2/3\n{text}")

args = ["--engine", mutant, "--filter", "decode", "--properties", "--cases", "10", "--shrink-time", "0"]
whole = unsharded("mutant", 1, args)
proc, marker = fleet("mutant", 2, args, fault="kill-ringkv:1")
text = proc.stdout + proc.stderr
if proc.returncode != 1:
    failures.append(f"failing engine: exit {proc.returncode}, expected 1\n{text}")
else:
    got = masked(os.path.join(work, "mutant.json"))
    if got != whole:
        failures.append("failing engine: the merged JSON differs from the unsharded run's")
    # The unsharded run's text report: the first 10 failures per engine with their reproduce lines, the
    # others by name.
    for k, c in enumerate([c for c in got["cases"] if c["status"] == "failed"]):
        shown = f"reproduce: {c['reproduce']}" in proc.stdout if k < 10 else c["name"] in proc.stdout
        if not shown:
            failures.append(f"failing engine: {c['name']} is not in the report (with its reproduce line)\n{proc.stdout}")
            break
    if not any(c["status"] == "failed" for c in got["cases"]):
        failures.append("failing engine: no failing case")
if not os.path.exists(marker):
    failures.append("failing engine: shard 1's ringkv was never killed (no fault marker)")

proc, _ = fleet("lost", 2, ["--engine", "reference", "--filter", "decode"], fault="kill-worker:2", extra=["--max-retries", "0"])
text = proc.stdout + proc.stderr
if proc.returncode != 2 or "shard 2/2 gave no report" not in text:
    failures.append(f"no retries left: expected exit 2 naming shard 2/2, got {proc.returncode}\n{text}")

if failures:
    sys.exit("FAILED:\n" + "\n\n".join(failures))
print("PASSED: a killed worker and a killed ringkv retried, merged verdicts the unsharded ones, a lost shard named")
