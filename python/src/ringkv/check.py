"""Running the installed `ringkv` CLI: `ringkv check --outputs` and `ringkv golden list`/`generate`.

    report = check("outputs", golden_dir="golden")   # the parsed JSON report of `ringkv check --json`
    for case in report["cases"]:
        case["name"], case["status"], case["detail"], case["classes"], case["reproduce"], case["worst_ratio"]

The CLI is found from the `ringkv` argument, else the environment variable RINGKV, else the CLI the
platform wheel bundles (ringkv/_data/bin/ringkv), else PATH. A case's
status is "passed", "failed", "skipped" (its detail says why: not applicable, or unsupported), "xfail",
"xpass" or "error" (unusable input); verdict_of() turns one into (outcome, message).
"""
import json
import os
import re
import shutil
import subprocess
import tempfile

from ._cli import bundled_cli
from .errors import CheckError


def find_ringkv(ringkv=None):
    """The path of the ringkv CLI: the argument, else $RINGKV, else the wheel's bundled CLI, else `ringkv` on PATH."""
    candidate = ringkv or os.environ.get("RINGKV") or bundled_cli() or shutil.which("ringkv")
    if not candidate:
        raise CheckError("the ringkv CLI was not found: pass ringkv=PATH (pytest: --ringkv PATH), set RINGKV=PATH, "
                         "install the platform wheel (pip wheel ./python), or put the installed tree's bin/ on PATH")
    if os.sep not in candidate:
        found = shutil.which(candidate)
        candidate = found or candidate
    if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
        source = "the argument" if ringkv else ("RINGKV" if os.environ.get("RINGKV") else
                                                ("the wheel" if candidate == bundled_cli() else "PATH"))
        raise CheckError(f"the ringkv CLI {candidate} (from {source}) is not an executable file")
    return os.path.abspath(candidate)


def default_golden_dir(ringkv=None):
    """The golden set the installed CLI uses by default: $RINGKV_DATA_DIR/golden, else
    <bin>/../share/ringkv/golden next to the CLI (support/data_dir.hpp). A CLI in a build tree has
    its source tree's golden/ compiled in, which cannot be found from here: pass the folder then."""
    exe = find_ringkv(ringkv)
    candidates = []
    if os.environ.get("RINGKV_DATA_DIR"):
        candidates.append(os.path.join(os.environ["RINGKV_DATA_DIR"], "golden"))
    candidates.append(os.path.join(os.path.dirname(os.path.realpath(exe)), "..", "share", "ringkv", "golden"))
    for c in candidates:
        if os.path.isfile(os.path.join(c, "manifest.json")):
            return os.path.normpath(c)
    raise CheckError(f"no installed golden set next to {exe} (looked in {', '.join(map(os.path.normpath, candidates))}): "
                     "pass the golden folder (pytest: --ringkv-golden DIR)")


def _run(cmd, what):
    try:
        return subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise CheckError(f"{what}: cannot run {cmd[0]}: {e.strerror}") from None


def check(outputs_dir, golden_dir=None, ringkv=None, filter=None, capabilities=None, profile=None, scale=None):
    """Runs `ringkv check --outputs OUTPUTS_DIR --json` and returns the parsed report (a dict: "passed",
    "cases", "coverage", ...). golden_dir: default the CLI's own default set; filter: a regex over
    "name id classes" (`--filter`); capabilities: a capabilities file (default: OUTPUTS_DIR's
    capabilities.json, if there); profile: a named profile or a profile file (`--profile`); scale: a
    scale tier ("ci", ...): the outputs of `ringkv golden generate --scale TIER` (generate_scale), judged
    on the sampled rows instead of a golden set (`--scale TIER --no-golden`, docs/scale.md).
    Exit code 0 (passed) and 1 (failed) give the report; anything else raises CheckError."""
    exe = find_ringkv(ringkv)
    if scale is not None and golden_dir is not None:
        raise CheckError("check(): golden_dir and scale exclude each other (a scale set holds no expected outputs)")
    with tempfile.TemporaryDirectory(prefix="ringkv-check-") as tmp:
        report_path = os.path.join(tmp, "report.json")
        cmd = [exe, "check", "--quiet", "--outputs", outputs_dir, "--json", report_path]
        if scale is not None:
            cmd += ["--scale", str(scale), "--no-golden"]
        for flag, value in (("--golden", golden_dir), ("--filter", filter), ("--capabilities", capabilities),
                            ("--profile", profile)):
            if value is not None:
                cmd += [flag, str(value)]
        proc = _run(cmd, "ringkv check")
        if proc.returncode not in (0, 1) or not os.path.isfile(report_path):
            raise CheckError(f"ringkv check exited {proc.returncode} without a verdict: {' '.join(cmd)}\n"
                             f"{(proc.stdout + proc.stderr).strip()[-4000:]}")
        with open(report_path) as f:
            report = json.load(f)
    report["exit_code"] = proc.returncode
    report["output"] = proc.stdout
    return report


def cases_within(capabilities_file, golden_dir=None, ringkv=None):
    """The names of the cases of a golden set within a capabilities file, by ringkv's own rule
    (`ringkv golden list --capabilities`)."""
    exe = find_ringkv(ringkv)
    cmd = [exe, "golden", "list", "--capabilities", capabilities_file] + (["--golden", golden_dir] if golden_dir else [])
    proc = _run(cmd, "ringkv golden list")
    if proc.returncode:
        raise CheckError(f"ringkv golden list exited {proc.returncode}: {' '.join(cmd)}\n{proc.stderr.strip()[-4000:]}")
    return {line.split()[0] for line in proc.stdout.splitlines() if line.strip() and not line.startswith("#")}


def generate_scale(out_dir, tier, filter=None, ringkv=None):
    """`ringkv golden generate --scale TIER [--filter REGEX] --out OUT_DIR`: a tier's scale cases, inputs
    only (replay them like a golden set; judge the outputs with check(..., scale=TIER))."""
    exe = find_ringkv(ringkv)
    cmd = [exe, "golden", "generate", "--scale", str(tier), "--out", out_dir] + (["--filter", filter] if filter else [])
    proc = _run(cmd, "ringkv golden generate")
    if proc.returncode:
        raise CheckError(f"ringkv golden generate exited {proc.returncode}: {' '.join(cmd)}\n"
                         f"{(proc.stdout + proc.stderr).strip()[-4000:]}")
    return out_dir


def generate_random(out_dir, n, seed, capabilities_file=None, ringkv=None):
    """`ringkv golden generate --random N --seed S [--capabilities FILE] --out OUT_DIR`: a random set."""
    exe = find_ringkv(ringkv)
    cmd = [exe, "golden", "generate", "--random", str(n), "--seed", str(seed), "--out", out_dir]
    if capabilities_file:
        cmd += ["--capabilities", capabilities_file]
    proc = _run(cmd, "ringkv golden generate")
    if proc.returncode:
        raise CheckError(f"ringkv golden generate exited {proc.returncode}: {' '.join(cmd)}\n"
                         f"{(proc.stdout + proc.stderr).strip()[-4000:]}")
    return out_dir


UNSUPPORTED = "unsupported (outputs file): "
OUTSIDE = re.compile(r"^outside the capabilities in .*?: unsupported: (.*)$", re.S)


def verdict_of(case):
    """(outcome, message) of one case of a report: outcome "passed", "failed", "unsupported",
    "not applicable", "xfail" or "error"; the message says why (for "failed": the worst error, the
    boundary classes and the reproduce command)."""
    status, detail = case.get("status"), case.get("detail", "")
    if status == "passed":
        return "passed", ""
    if status == "skipped":
        if detail.startswith(UNSUPPORTED):
            return "unsupported", "unsupported: " + detail[len(UNSUPPORTED):]
        m = OUTSIDE.match(detail)
        return "not applicable", "not applicable: " + (m.group(1) if m else detail)
    if status == "xfail":
        return "xfail", detail
    text = (f"ringkv check: case {case.get('name')} {status}\n"
            f"  id: {case.get('id')}\n"
            f"  worst error: {case.get('worst_ratio', float('nan')):.6g} x the bound; first failure: {detail}\n"
            f"  boundary classes: {' '.join(case.get('classes', []))}\n"
            f"  reproduce: {case.get('reproduce', '')}")
    return ("failed" if status in ("failed", "xpass") else "error"), text
