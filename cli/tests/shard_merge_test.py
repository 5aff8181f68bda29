#!/usr/bin/env python3
"""ctest cli.shard_merge_same_as_unsharded (issue 28): `ringkv check --shard I/N` run as N separate
processes, then `ringkv report merge`, gives the unsharded run's JSON report (timings masked), JUnit
report, text report (and with --table at N = 3) and exit code, at N = 1, 3 and 7:

- passing engines (reference and cuda-plan, golden cases and properties);
- a failing engine (a mutant plugin: golden failures, property failures shrunk to the end);
- a coverage verdict that needs the whole run (--require-classes: classes judged in one shard only
  pass once merged; a class no shard judged fails the merged run, as it fails the unsharded one).

And the shards are disjoint parts of the work (merge checks each shard holds exactly its items), and
a merge of shards that are not one run is an error naming them: a shard missing, one given twice,
shards of other options, golden sets or engines.

usage: shard_merge_test.py RINGKV MUTANT_PLUGIN WORK_DIR GOLDEN_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_mask import masked, masked_text  # noqa: E402

ringkv, mutant, work, golden = sys.argv[1:5]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []


def run(args, expect_rc=None, what=""):
    proc = subprocess.run([ringkv, *args], capture_output=True, text=True, timeout=900)
    if expect_rc is not None and proc.returncode != expect_rc:
        sys.exit(f"FAILED: {what}: ringkv {' '.join(args)} exited {proc.returncode}, expected {expect_rc}\n"
                 f"{proc.stdout}{proc.stderr}")
    return proc




def scenario(name, expect_rc, args):
    whole = os.path.join(work, f"{name}-whole")
    whole_text = masked_text(run(["check", "--quiet", *args, "--json", whole + ".json", "--junit", whole + ".xml"],
                                 expect_rc, f"{name} unsharded").stdout)
    whole_table = masked_text(run(["check", "--quiet", "--table", *args], expect_rc, f"{name} unsharded --table").stdout)
    reference = masked(whole + ".json")
    items = len(reference["shard"]["work"])
    for n in (1, 3, 7):
        shards = []
        for i in range(1, n + 1):
            out = os.path.join(work, f"{name}-{i}of{n}.json")
            run(["check", "--quiet", *args, "--shard", f"{i}/{n}", "--json", out], None, f"{name} shard {i}/{n}")
            shards.append(out)
        merged = os.path.join(work, f"{name}-merged{n}")
        proc = run(["report", "merge", *shards, "--json", merged + ".json", "--junit", merged + ".xml"], None, f"{name} merge")
        if proc.returncode != expect_rc:
            failures.append(f"{name}, {n} shards: merge exited {proc.returncode}, the unsharded run {expect_rc}\n{proc.stdout}{proc.stderr}")
        if masked_text(proc.stdout) != whole_text:
            failures.append(f"{name}, {n} shards: the merge's text report differs from the unsharded run's:\n"
                            f"--- unsharded ---\n{whole_text}\n--- merged ---\n{proc.stdout}")
        if n == 3:
            table = run(["report", "merge", "--table", *shards], None, f"{name} merge --table")
            if masked_text(table.stdout) != whole_table:
                failures.append(f"{name}, {n} shards: the merge's --table report differs from the unsharded run's:\n"
                                f"--- unsharded ---\n{whole_table}\n--- merged ---\n{table.stdout}")
        got = masked(merged + ".json")
        if got != reference:
            diff = [k for k in sorted(set(got) | set(reference)) if got.get(k) != reference.get(k)]
            failures.append(f"{name}, {n} shards: the merged JSON differs from the unsharded one in {diff}: "
                            f"diff {whole}.json {merged}.json")
        if masked_text(open(merged + ".xml").read()) != masked_text(open(whole + ".xml").read()):
            failures.append(f"{name}, {n} shards: the merged JUnit differs: diff {whole}.xml {merged}.xml")
        # Balanced by estimated cost: no shard's load beyond the mean by more than the costliest item
        # (the longest-first split's bound), and with at least N items every shard has some, none all.
        work_items = reference["shard"]["work"]
        total, top = sum(w["cost"] for w in work_items), max(w["cost"] for w in work_items)
        for i, s in enumerate(shards, 1):
            with open(s) as f:
                d = json.load(f)
            load = sum(w["cost"] for w in d["shard"]["work"] if w["shard"] == i)
            if load > total / n + top + 1e-9:
                failures.append(f"{name}: shard {i}/{n} has an estimated {load:.3f} s of {total:.3f} s (mean {total / n:.3f}, costliest item {top:.3f})")
            mine = len(d.get("cases", [])) + len(d.get("properties", []))
            if n > 1 and items >= n and not 0 < mine < items:
                failures.append(f"{name}: {s} holds {mine} of {items} work items")
    print(f"{name}: merged JSON, JUnit and text of 1, 3 and 7 shards equal the unsharded run's ({items} work items, exit {expect_rc})")
    return reference


ok = scenario("passing", 0, ["--engine", "reference", "--engine", "cuda-plan", "--properties", "--cases", "5"])
if ok["passed"] is not True or not ok.get("properties"):
    failures.append("passing: the unsharded run did not pass with properties")
bad = scenario("mutant", 1, ["--engine", mutant, "--properties", "--cases", "20", "--shrink-time", "inf"])
if not any(c["status"] == "failed" for c in bad["cases"]) or all(p["passed"] for p in bad["properties"]):
    failures.append("mutant: the comparison has no golden or no property failure to compare")
# Classes judged by different shards: required, and judged only once the shards are merged.
cov = scenario("coverage-pass", 0, ["--engine", "reference", "--filter", "^decode_w8 |sinks", "--require-classes", "^(sinks|t=W)$"])
cov_fail = scenario("coverage-fail", 1, ["--engine", "reference", "--filter", "^decode_w8 ", "--require-classes", "^sinks$"])
if not cov_fail["reasons"] or "sinks" not in cov_fail["reasons"][0]:
    failures.append(f"coverage-fail: the unsharded run does not fail for the unjudged class: {cov_fail['reasons']}")

# ---- merges of shards that are not one run ----
def shard_of(name, spec, *extra):
    out = os.path.join(work, name + ".json")
    run(["check", "--quiet", "--engine", "reference", "--filter", "decode", "--shard", spec, "--json", out, *extra])
    return out


s1, s2, s3 = (shard_of(f"err-{i}", f"{i}/3") for i in (1, 2, 3))
seed2 = shard_of("err-seed2", "2/3", "--seed", "2", "--properties", "--cases", "3")
seed1p = shard_of("err-seed1p", "1/3", "--properties", "--cases", "3")
other_golden = os.path.join(work, "golden-copy")
shutil.copytree(golden, other_golden)
with open(os.path.join(other_golden, "manifest.json")) as f:  # another golden set: one case fewer
    manifest = json.load(f)
manifest["cases"] = [c for c in manifest["cases"] if c["name"] != "decode_w8"]
with open(os.path.join(other_golden, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=2)
golden2 = shard_of("err-golden2", "2/3", "--golden", other_golden)
engine2 = os.path.join(work, "err-engine2.json")
run(["check", "--quiet", "--engine", "cuda-plan", "--filter", "decode", "--shard", "2/3", "--json", engine2])
for what, files, pattern in [
    ("a shard missing", [s1, s2], r"shard\(s\) 3/3 missing"),
    ("a shard given twice", [s1, s2, s2, s3], r"shard 2/3 given twice: .*err-2\.json and .*err-2\.json"),
    ("other options", [seed1p, seed2], r"err-seed1p\.json \(shard 1/3\) and .*err-seed2\.json \(shard 2/3\) are not shards of one run: different suites: .*seed \(1 against 2\)"),
    ("another golden set", [s1, golden2, s3], r"err-golden2\.json .* different golden sets: .*manifest_sha256"),
    ("other engines", [s1, engine2, s3], r"err-engine2\.json .* different engines"),
    ("not a shard report", [os.path.join(work, "passing-whole.xml")], r"not JSON"),
]:
    proc = run(["report", "merge", *files])
    text = proc.stdout + proc.stderr
    if proc.returncode != 2 or not re.search(pattern, text):
        failures.append(f"merge of {what}: expected exit 2 and /{pattern}/, got {proc.returncode}:\n{text}")
if run(["report", "merge", s1, s2, s3]).returncode != 0:
    failures.append("the three shards of the error cases do not merge")

if failures:
    sys.exit("FAILED:\n" + "\n\n".join(failures))
print("PASSED")
