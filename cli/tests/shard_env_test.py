#!/usr/bin/env python3
"""ctest cli.shard_from_runner_environment (issue 28): without --shard, `ringkv check` reads the shard
from the variables runners set, in the documented order (docs/fleet.md), minding each one's base:

  GTEST_SHARD_INDEX (0-based) / GTEST_TOTAL_SHARDS
  JOB_COMPLETION_INDEX (0-based) with --shard-count N or RINGKV_SHARD_COUNT
  SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN / SLURM_ARRAY_TASK_COUNT
  CI_NODE_INDEX (1-based) / CI_NODE_TOTAL
  BUILDKITE_PARALLEL_JOB (0-based) / BUILDKITE_PARALLEL_JOB_COUNT

The JSON report's shard header says which shard ran; --shard wins over the environment; a bad value
is exit code 2 with a message naming the variable and the allowed range.

usage: shard_env_test.py RINGKV WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

ringkv, work = sys.argv[1:3]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []
CONVENTION_VARS = ["GTEST_SHARD_INDEX", "GTEST_TOTAL_SHARDS", "JOB_COMPLETION_INDEX", "RINGKV_SHARD_COUNT",
                   "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "CI_NODE_INDEX",
                   "CI_NODE_TOTAL", "BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT", "GTEST_SHARD_STATUS_FILE"]
clean = {k: v for k, v in os.environ.items() if k not in CONVENTION_VARS}
n_run = 0


def run(env, *args):
    global n_run
    n_run += 1
    out = os.path.join(work, f"run{n_run}.json")
    proc = subprocess.run([ringkv, "check", "--engine", "reference", "--filter", "decode", "--json", out, *args],
                          env={**clean, **env}, capture_output=True, text=True, timeout=300)
    shard = None
    if proc.returncode == 0:
        with open(out) as f:
            shard = json.load(f)["shard"]
    return proc, shard


cases = [
    ({"GTEST_SHARD_INDEX": "0", "GTEST_TOTAL_SHARDS": "3"}, [], (1, 3), "GTEST_SHARD_INDEX/GTEST_TOTAL_SHARDS"),
    ({"GTEST_SHARD_INDEX": "2", "GTEST_TOTAL_SHARDS": "3"}, [], (3, 3), "GTEST_SHARD_INDEX"),
    ({"JOB_COMPLETION_INDEX": "4"}, ["--shard-count", "7"], (5, 7), "JOB_COMPLETION_INDEX/--shard-count"),
    ({"JOB_COMPLETION_INDEX": "0", "RINGKV_SHARD_COUNT": "2"}, [], (1, 2), "JOB_COMPLETION_INDEX/RINGKV_SHARD_COUNT"),
    ({"SLURM_ARRAY_TASK_ID": "6", "SLURM_ARRAY_TASK_COUNT": "7", "SLURM_ARRAY_TASK_MIN": "1"}, [], (6, 7), "SLURM_ARRAY_TASK_ID"),
    ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "4"}, [], (1, 4), "SLURM_ARRAY_TASK_ID"),
    ({"CI_NODE_INDEX": "3", "CI_NODE_TOTAL": "3"}, [], (3, 3), "CI_NODE_INDEX/CI_NODE_TOTAL"),
    ({"BUILDKITE_PARALLEL_JOB": "0", "BUILDKITE_PARALLEL_JOB_COUNT": "5"}, [], (1, 5), "BUILDKITE_PARALLEL_JOB"),
    # The documented order: GoogleTest's before GitLab's.
    ({"GTEST_SHARD_INDEX": "1", "GTEST_TOTAL_SHARDS": "2", "CI_NODE_INDEX": "1", "CI_NODE_TOTAL": "5"}, [], (2, 2), "GTEST_SHARD_INDEX"),
    # --shard wins; --shard 1/1 runs everything whatever the environment says.
    ({"CI_NODE_INDEX": "2", "CI_NODE_TOTAL": "3"}, ["--shard", "3/4"], (3, 4), "--shard"),
    ({"CI_NODE_INDEX": "2", "CI_NODE_TOTAL": "3"}, ["--shard", "1/1"], (1, 1), None),
    ({}, [], (1, 1), None),
]
status_file = os.path.join(work, "shard-status")
cases.append(({"GTEST_SHARD_INDEX": "1", "GTEST_TOTAL_SHARDS": "2", "GTEST_SHARD_STATUS_FILE": status_file}, [], (2, 2),
              "GTEST_SHARD_INDEX"))
for env, args, (index, count), source in cases:
    proc, shard = run(env, *args)
    if shard is None or (shard["index"], shard["count"]) != (index, count):
        failures.append(f"{env} {args}: expected shard {index}/{count}, got {shard and (shard['index'], shard['count'])} "
                        f"(exit {proc.returncode})\n{proc.stdout}{proc.stderr}")
    elif source and count > 1 and source not in proc.stderr:
        failures.append(f"{env} {args}: stderr does not say the shard came from {source}:\n{proc.stderr}")

if not os.path.exists(status_file):
    failures.append("GTEST_SHARD_STATUS_FILE was not touched (Bazel would not run the test sharded)")

bad = [
    ({"GTEST_SHARD_INDEX": "3", "GTEST_TOTAL_SHARDS": "3"}, [], r'GTEST_SHARD_INDEX="3": must be a whole number from 0 to 2 \(0-based'),
    ({"GTEST_SHARD_INDEX": "0"}, [], r"GTEST_SHARD_INDEX is set \(0\) but GTEST_TOTAL_SHARDS is not"),
    ({"GTEST_SHARD_INDEX": "0", "GTEST_TOTAL_SHARDS": "0"}, [], r'GTEST_TOTAL_SHARDS="0": must be a whole number from 1 to 100000'),
    ({"CI_NODE_INDEX": "0", "CI_NODE_TOTAL": "3"}, [], r'CI_NODE_INDEX="0": must be a whole number from 1 to 3 \(1-based'),
    ({"CI_NODE_INDEX": "two", "CI_NODE_TOTAL": "3"}, [], r'CI_NODE_INDEX="two": must be a whole number from 1 to 3'),
    ({"BUILDKITE_PARALLEL_JOB": "-1", "BUILDKITE_PARALLEL_JOB_COUNT": "2"}, [], r'BUILDKITE_PARALLEL_JOB="-1": must be a whole number from 0 to 1'),
    ({"JOB_COMPLETION_INDEX": "1"}, [], r"JOB_COMPLETION_INDEX is set \(1, a Kubernetes Indexed Job\) but the number of shards is not: pass --shard-count"),
    ({"JOB_COMPLETION_INDEX": "7"}, ["--shard-count", "7"], r'JOB_COMPLETION_INDEX="7": must be a whole number from 0 to 6 \(0-based, --shard-count = 7\)'),
    ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "1"}, [], r'SLURM_ARRAY_TASK_ID="0": must be a whole number from 1 to 4'),
    ({}, ["--shard", "4/3"], r'--shard "4/3": the index I must be a whole number from 1 to 3'),
    ({}, ["--shard", "0/3"], r'--shard "0/3": the index I must be a whole number from 1 to 3'),
    ({}, ["--shard", "1/0"], r'--shard "1/0": the count N must be a whole number from 1 to 100000'),
    ({}, ["--shard", "2"], r'--shard "2": must be I/N'),
    ({}, ["--shard-count", "3"], r"--shard-count needs JOB_COMPLETION_INDEX"),
]
for env, args, pattern in bad:
    proc, _ = run(env, *args)
    if proc.returncode != 2 or not re.search(pattern, proc.stderr):
        failures.append(f"{env} {args}: expected exit 2 and /{pattern}/, got {proc.returncode}:\n{proc.stdout}{proc.stderr}")

if failures:
    sys.exit("FAILED:\n" + "\n\n".join(failures))
print(f"PASSED: {len(cases)} environments read, {len(bad)} bad values refused")
