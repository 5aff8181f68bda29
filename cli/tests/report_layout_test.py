#!/usr/bin/env python3
"""ctest cli.report_layout (issue 30): what `ringkv check` prints on stdout, in the order a reader needs it.

- The main job (`ringkv check`, every built-in engine) passing: at most 40 lines, a verdict line per
  engine, the verdict line last, no table per boundary class.
- A failing engine (a mutant plugin, a few named cases): stdout begins with the failures; each failing
  case of the JSON report is there with its reproduce line, before anything that is not a failure.
- The same engine on every case: the first 10 failures in full, the others by name in one line.
- --table: the table per boundary class and every property's line before the report; --verbose and -v
  are the same; the JSON and JUnit reports are the same with and without --table.

usage: report_layout_test.py RINGKV MUTANT_PLUGIN WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

ringkv, mutant, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []


def check(condition, what, text=""):
    if not condition:
        failures.append(f"{what}\n--- stdout ---\n{text}")


def run(name, expect_rc, *args):
    """ringkv check ARGS with --json and --junit under WORK/NAME.*: (stdout, the parsed JSON, the JUnit text)."""
    base = os.path.join(work, name)
    proc = subprocess.run([ringkv, "check", "--quiet", "--json", base + ".json", "--junit", base + ".xml", *args],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != expect_rc:
        sys.exit(f"FAILED: {name}: ringkv check {' '.join(args)} exited {proc.returncode}, expected {expect_rc}\n"
                 f"{proc.stdout}{proc.stderr}")
    with open(base + ".json") as f:
        report = json.load(f)
    with open(base + ".xml") as f:
        junit = f.read()
    return proc.stdout, report, junit


# The main job, passing: one screen, the verdict last.
out, report, _ = run("main_job", 0)
lines = out.rstrip("\n").split("\n")
check(len(lines) <= 40, f"main job: {len(lines)} lines on stdout, more than one screen (40)", out)
check(lines[-1].startswith("PASSED: "), "main job: the last line is not the verdict line", out)
check(not re.search(r"^boundary class +level", out, re.M), "main job: the table per boundary class is printed without --table", out)
check(re.search(r"^\(--table: the table per boundary class", out, re.M), "main job: the --table hint is missing", out)
for engine in {c["engine"] for c in report["cases"]}:
    check(re.search(rf"^engine {re.escape(engine)}: PASSED, [0-9]+ golden cases from ", out, re.M),
          f"main job: no verdict line for engine {engine}", out)
    check(re.search(rf"^  coverage of {re.escape(engine)}: core ", out, re.M), f"main job: no coverage of {engine}", out)
for skipped in report.get("skipped_engines", []):
    check(f"engine {skipped['engine']} skipped: " in out, f"main job: skipped engine {skipped['engine']} not said", out)

# A failing engine: the failures first, each with its reproduce line.
cases = "^(decode_w8|decode_w8_sinks2|window_1|batch3_same_positions|chunk_2w_crosses_wrap) "
out, report, _ = run("failing", 1, "--engine", mutant, "--filter", cases)
failed = [c for c in report["cases"] if c["status"] == "failed"]
check(len(failed) >= 3, f"failing: the mutant failed {len(failed)} of the cases, expected at least 3", out)
check(out.startswith("FAILED "), "failing: stdout does not begin with a failure", out)
first_other = re.search(r"^(?!FAILED |  |$)", out, re.M)  # the first line outside the failure blocks
end_of_failures = first_other.start() if first_other else len(out)
for c in failed:
    block = re.search(rf"^FAILED {re.escape(c['name'])} \[failed\] on engine [^\n]*\n  case: [^\n]*\n  classes: [^\n]*\n"
                      rf"  [^\n]*\n  reproduce: ([^\n]*)", out, re.M)
    check(block is not None, f"failing: no failure block with a reproduce line for {c['name']}", out)
    if block:
        check(block.group(1) == c["reproduce"].split("\n")[0], f"failing: {c['name']}: the reproduce line is not the JSON's", out)
        check(block.end() <= end_of_failures, f"failing: {c['name']} is reported after other lines", out)
check(re.search(r"^engine [^\n]*: FAILED, 5 golden cases from ", out, re.M), "failing: no FAILED verdict for the engine", out)
check(out.rstrip("\n").split("\n")[-1].startswith("FAILED: "), "failing: the last line is not the verdict line", out)

# Every case: ten failures in full, the others named in one line.
out, report, _ = run("failing_all", 1, "--engine", mutant)
failed = [c["name"] for c in report["cases"] if c["status"] == "failed"]
shown = re.findall(r"^FAILED ([a-z0-9_]+) \[failed\] on engine ", out, re.M)
check(len(failed) > 10 and shown == failed[:10], f"failing_all: shown {shown}, expected the first 10 of {len(failed)}", out)
more = re.search(rf"^FAILED on engine [^\n]*, {len(failed) - 10} more cases \([^)]*\): ([^\n]*)$", out, re.M)
check(more is not None and more.group(1).split(", ") == failed[10:], "failing_all: the other failures are not named", out)
check(len(out.split("\n")) < 100, "failing_all: the report is longer than 100 lines", out)

# --table: the table and the properties' lines; the machine-readable reports do not change.
args = ["--engine", "reference", "--filter", "^(decode_w8|window_1|OracleEquality)$|^(decode_w8|window_1) ",
        "--properties", "--cases", "3"]
plain, plain_json, plain_junit = run("plain", 0, *args)
table, table_json, table_junit = run("table", 0, "--table", *args)
check(re.search(r"^boundary class +level +passed +failed +xfail +skipped +error +worst/tol +coverage\n", table, re.M),
      "--table: no table header", table)
check(re.search(r"^t=W\+1 +core +[0-9]+ +0 +0 +0 +0 ", table, re.M), "--table: no row for t=W+1", table)
check(re.search(r"^property OracleEquality +passed$", table, re.M), "--table: no property line", table)
check(table.endswith(re.sub(r"^\(--table: [^\n]*\n", "", plain, flags=re.M)),
      "--table: the report after the table is not the default report (less its --table hint)", table)
for flag in ("--verbose", "-v"):
    verbose, _, _ = run("verbose" + flag, 0, flag, *args)
    check(verbose == table, f"{flag}: not the same output as --table", verbose)
for key in ("passed", "errors", "reasons", "cases", "coverage"):
    check(plain_json.get(key) == table_json.get(key), f"--table changed the JSON report's {key}")
check(plain_junit == table_junit, "--table changed the JUnit report")

if failures:
    sys.exit("FAILED:\n" + "\n\n".join(failures))
print("report layout: the main job fits a screen, failures come first with their reproduce lines, --table adds the table")
