#!/usr/bin/env python3
"""Verdicts per case from `ringkv check --outputs ... --json REPORT`, against an engine's expected.json.

    verdicts.py compare REPORT EXPECTED       exit 1 when any case's verdict, or any class's coverage
                                              (judged, not applicable, not judged), differs from EXPECTED's
    verdicts.py expect REPORT EXPECTED        rewrite EXPECTED from REPORT (keeps the reasons written
                                              for known deviations; a new deviation gets "UNREVIEWED",
                                              which `compare` rejects until a person explains it)
    verdicts.py random REPORT EXPECTED N SEED exit 1 unless the random set (N cases, SEED) fails exactly on
                                              EXPECTED's "random" deviations (reviewed, with reasons); every
                                              other case passes or is unsupported / not applicable
    verdicts.py expect-random REPORT EXPECTED N SEED   record the random set's deviations in EXPECTED
                                              (new ones "UNREVIEWED", which `random` rejects)
    verdicts.py table REPORT                  the Markdown table per boundary class of docs/engines.md
    verdicts.py bug REPORT CLASS...           exit 0 only when the run failed and the failed cases
                                              cover every CLASS (the planted bug is caught there)
    verdicts.py summary MANIFEST EXPECTED...  the cross-engine table at the top of docs/engines.md: per boundary
                                              class and engine, from the expected.json files (committed goldens
                                              and random set) and the golden manifest's classes per case
    verdicts.py summary-check DOC MANIFEST EXPECTED...  exit 1 when DOC's table (between the markers
                                              SUMMARY_BEGIN and SUMMARY_END) is not what `summary` prints

A verdict is "pass", "deviation" (the case fails: expected.json gives the reason and the command that
reproduces it), "unsupported" (the adapter's outputs file declares it, with the reason),
"not applicable" (outside the engine's capabilities.json) or "error" (unusable input: never expected).
"""
import json
import re
import sys

UNREVIEWED = "UNREVIEWED"


def verdict(case):
    status, detail = case["status"], case.get("detail", "")
    if status == "passed":
        return "pass", ""
    if status == "failed":
        return "deviation", detail
    if status == "skipped" and detail.startswith("unsupported (outputs file): "):
        return "unsupported", detail[len("unsupported (outputs file): "):]
    if status == "skipped":  # "outside the capabilities in PATH: unsupported: WHAT": keep WHAT
        return "not applicable", detail.split(": unsupported: ", 1)[-1]
    return "error", detail


def load_report(path):
    with open(path) as f:
        return {c["name"]: c for c in json.load(f)["cases"]}


def load_coverage(path):
    """{class: "judged" | "not applicable" | "not judged"} of the (one) engine of a report."""
    with open(path) as f:
        engines = json.load(f).get("coverage", [])
    return {c["class"]: c["status"].replace("_", " ") for c in engines[0]["classes"]} if engines else {}


def compare(report_path, expected_path):
    report = load_report(report_path)
    with open(expected_path) as f:
        expected_file = json.load(f)
    expected = expected_file["cases"]
    problems = []
    coverage = load_coverage(report_path)
    for k in sorted(set(coverage) | set(expected_file.get("coverage", {}))):
        got, want = coverage.get(k, "(absent)"), expected_file.get("coverage", {}).get(k, "(not listed)")
        if got != want:
            problems.append(f"class {k}: {got}, expected {want}")
    for name in sorted(set(report) | set(expected)):
        if name not in report:
            problems.append(f"{name}: in {expected_path} but not in the golden set")
            continue
        got, detail = verdict(report[name])
        want = expected.get(name, {}).get("verdict", "(not listed)")
        if got != want:
            problems.append(f"{name}: verdict {got!r}, expected {want!r}" + (f" ({detail})" if detail else "") +
                            f"\n    reproduce: {report[name].get('reproduce', '')}")
        elif got == "deviation" and expected[name].get("reason", UNREVIEWED) == UNREVIEWED:
            problems.append(f"{name}: a deviation nobody has explained in {expected_path} ({detail})")
    problems += deviation_problems(expected_file, {n: c.get("classes", []) for n, c in report.items()})
    counts = {}
    for c in report.values():
        counts[verdict(c)[0]] = counts.get(verdict(c)[0], 0) + 1
    print(f"{len(report)} cases: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    if problems:
        print(f"FAILED: {len(problems)} verdict(s) differ from {expected_path} (a new engine version or a suite change "
              "moved them: review, then `verdicts.py expect` and explain each deviation):")
        for p in problems:
            print("  " + p)
        return 1
    print(f"every verdict as in {expected_path}")
    return 0


def expect(report_path, expected_path):
    report = load_report(report_path)
    try:
        with open(expected_path) as f:
            old = json.load(f)
    except FileNotFoundError:
        old = {"cases": {}}
    cases = {}
    for name, c in sorted(report.items()):
        v, detail = verdict(c)
        entry = {"verdict": v}
        if v == "deviation":
            kept = old["cases"].get(name, {})
            entry["reason"] = kept.get("reason", UNREVIEWED) if kept.get("verdict") == "deviation" else UNREVIEWED
            if kept.get("verdict") == "deviation" and "deviation" in kept:
                entry["deviation"] = kept["deviation"]
            entry["failure"] = detail
            entry["reproduce"] = c.get("reproduce", "")
        elif v != "pass":
            entry["reason"] = detail
        cases[name] = entry
    out = {k: v for k, v in old.items() if k not in ("cases", "coverage")}
    out["cases"] = cases
    out["coverage"] = load_coverage(report_path)
    with open(expected_path, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {expected_path}: {len(cases)} cases")
    return 0


def random_set(report_path, expected_path, n, seed):
    report = load_report(report_path)
    with open(expected_path) as f:
        expected_file = json.load(f)
    expected = expected_file.get("random", {})
    if [expected.get("n"), expected.get("seed")] != [int(n), int(seed)]:
        print(f"FAILED: {expected_path} records the random set n={expected.get('n')} seed={expected.get('seed')}, "
              f"the test runs n={n} seed={seed}: run `verdicts.py expect-random` and review")
        return 1
    known = expected.get("deviations", {})
    bad = [(name, verdict(c)) for name, c in sorted(report.items()) if verdict(c)[0] in ("deviation", "error")]
    problems = [f"{name}: {v}: {detail}\n    reproduce: {report[name].get('reproduce', '')}"
                for name, (v, detail) in bad if v == "error" or name not in known]
    problems += [f"{name}: a known deviation ({known[name]['reason']}) that no longer fails" for name in sorted(known)
                 if verdict(report.get(name, {"status": "passed"}))[0] != "deviation"]
    problems += [f"{name}: a deviation nobody has explained in {expected_path}" for name in sorted(known)
                 if known[name].get("reason", UNREVIEWED) == UNREVIEWED]
    problems += deviation_problems(dict(expected_file, cases={}), {})  # the random set's deviation cases only
    ran = sum(1 for c in report.values() if verdict(c)[0] == "pass")
    if problems:
        print(f"FAILED: the random set ({n} cases, seed {seed}) differs from {expected_path}:")
        for p in problems:
            print("  " + p)
        return 1
    print(f"random set ({n} cases, seed {seed}): {ran} pass, {len(known)} known deviations as in {expected_path}, "
          "the others are unsupported or not applicable")
    return 0


def expect_random(report_path, expected_path, n, seed):
    report = load_report(report_path)
    with open(expected_path) as f:
        expected = json.load(f)
    old = expected.get("random", {}).get("deviations", {})
    deviations = {}
    for name, c in sorted(report.items()):
        v, detail = verdict(c)
        if v == "deviation":
            deviations[name] = {"reason": old.get(name, {}).get("reason", UNREVIEWED), "failure": detail,
                                "id": c.get("id", ""), "classes": c.get("classes", [])}
            if "deviation" in old.get(name, {}):
                deviations[name]["deviation"] = old[name]["deviation"]
    expected["random"] = {"n": int(n), "seed": int(seed), "deviations": deviations}
    with open(expected_path, "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote the random set's {len(deviations)} deviations to {expected_path}")
    return 0


def bug(report_path, classes):
    report = load_report(report_path)
    failed = {n: c for n, c in report.items()
              if verdict(c)[0] == "deviation" and not c.get("detail", "").startswith("no outputs file")}
    covered = set()
    for c in failed.values():
        covered.update(c.get("classes", []))
    missing = [k for k in classes if k not in covered]
    if not failed or missing:
        print(f"FAILED: the planted bug was not caught" + (f" on the classes {missing}" if failed else "") +
              f" ({len(failed)} cases failed)")
        return 1
    print(f"planted bug caught: {len(failed)} cases fail, on the classes {', '.join(classes)} among others")
    return 0


def table(report_path):
    """Per class, as `ringkv check` prints it: cases passed, failed, unsupported / not applicable, the worst
    error as a fraction of the bound, and the class's coverage."""
    report = load_report(report_path)
    coverage = load_coverage(report_path)
    print("| class | passed | failed | unsupported | n/a | worst / bound | coverage |")
    print("|---|---|---|---|---|---|---|")
    for k, status in coverage.items():
        cases = [c for c in report.values() if k in c.get("classes", [])]
        n = {v: sum(1 for c in cases if verdict(c)[0] == v) for v in ("pass", "deviation", "unsupported", "not applicable")}
        ratios = [c.get("worst_ratio") for c in cases if verdict(c)[0] in ("pass", "deviation")]
        worst = "NaN" if None in ratios else f"{max(ratios, default=0.0):.3g}"  # null: a NaN output
        print(f"| `{k}` | {n['pass']} | {n['deviation']} | {n['unsupported']} | {n['not applicable']} | "
              f"{worst} | {status} |")
    return 0


SUMMARY_BEGIN = "<!-- summary: generated by engines/common/verdicts.py summary; do not edit by hand -->"
SUMMARY_END = "<!-- end of summary -->"
CELL = {"pass": "pass", "n/a": "n/a", "not judged": "**not judged**"}


def declared_deviations(expected):
    """{id: {"title", "classes"}}: the engine's deviations from the spec as a person reviewed them. Each
    deviation case (committed or random) names one by its "deviation" id; its "classes" are the boundary
    classes the deviation is about (every such case has at least one of them), where the summary shows it."""
    return expected.get("deviations", {})


def deviation_problems(expected, classes_of):
    """What is wrong with the deviation cases' links to the declared deviations (empty: nothing)."""
    declared, problems = declared_deviations(expected), []
    cases = [(n, c, classes_of.get(n, [])) for n, c in expected["cases"].items() if c["verdict"] == "deviation"]
    cases += [(n, c, c.get("classes", [])) for n, c in expected.get("random", {}).get("deviations", {}).items()]
    for name, c, classes in cases:
        d = c.get("deviation")
        if d not in declared:
            problems.append(f"{name}: its \"deviation\" {d!r} is none of the declared deviations {sorted(declared)} "
                            "(expected.json: \"deviations\": {ID: {\"title\": ..., \"classes\": [the classes it is about]}}, "
                            "and each deviation case names its ID in \"deviation\"; docs/engines.md, Updating expected.json)")
        elif not set(declared[d]["classes"]) & set(classes):
            problems.append(f"{name}: deviation {d} is about {declared[d]['classes']}, the case has none of them ({classes})")
    return problems


def summary_cell(klass, status, expected):
    """One engine's cell for one class: the declared deviations about the class, else "pass" when the class
    was judged, "n/a" when the engine cannot express it, "not judged" otherwise."""
    about = [d for d, dev in sorted(declared_deviations(expected).items()) if klass in dev["classes"]]
    if about:
        return "**deviation " + ", ".join(about) + "**"
    return CELL["pass" if status == "judged" else "n/a" if status == "not applicable" else "not judged"]


def engine_title(expected):
    return expected.get("title") or expected.get("engine", "?")


def summary_lines(manifest_path, expected_paths):
    """The Markdown table: one row per boundary class of the golden set, one column per expected.json."""
    with open(manifest_path) as f:
        classes_of = {c["name"]: c["classes"] for c in json.load(f)["cases"]}
    engines = []
    for path in expected_paths:
        with open(path) as f:
            e = json.load(f)
        for name, c in e["cases"].items():  # the committed cases' classes, from the manifest
            c["classes"] = classes_of.get(name, [])
        engines.append(e)
    classes = sorted({k for e in engines for k in e.get("coverage", {})})
    lines = ["| class | " + " | ".join(engine_title(e) for e in engines) + " |",
             "|---|" + "---|" * len(engines)]
    for k in classes:
        lines.append(f"| `{k}` | " + " | ".join(summary_cell(k, e["coverage"].get(k, "not judged"), e)
                                                 for e in engines) + " |")
    lines.append("")
    lines.append("Deviations (each with its smallest case and reproduce command in the engine's section below):")
    lines.append("")
    where = {}  # one line per deviation of an engine, naming every variant that has it
    for e in engines:
        for d, dev in sorted(declared_deviations(e).items()):
            key = (e.get("engine", engine_title(e)), d, dev["title"], tuple(dev["classes"]))
            where.setdefault(key, []).append(engine_title(e))
    for (_, d, title, classes), titles in where.items():
        lines.append(f"- {' / '.join(titles)} deviation {d}: {title} ({', '.join('`' + k + '`' for k in classes)})")
    if not any(declared_deviations(e) for e in engines):
        lines.append("- none")
    return lines


def summary(manifest_path, *expected_paths):
    print("\n".join(summary_lines(manifest_path, expected_paths)))
    return 0


def summary_check(doc_path, manifest_path, *expected_paths):
    with open(doc_path) as f:
        text = f.read()
    m = re.search(re.escape(SUMMARY_BEGIN) + r"\n(.*?)\n" + re.escape(SUMMARY_END), text, re.S)
    if not m:
        print(f"FAILED: {doc_path} has no generated summary between '{SUMMARY_BEGIN}' and '{SUMMARY_END}'")
        return 1
    want = summary_lines(manifest_path, expected_paths)
    got = m.group(1).split("\n")
    if got != want:
        diff = [f"  doc: {g}\n  now: {w}" for g, w in zip(got, want) if g != w][:5]
        print(f"FAILED: the summary table in {doc_path} is stale ({len(got)} lines, {len(want)} now); regenerate it with\n"
              f"  python3 engines/common/verdicts.py summary {manifest_path} {' '.join(expected_paths)}\n" + "\n".join(diff))
        return 1
    print(f"the summary table in {doc_path} matches {len(expected_paths)} expected.json files")
    return 0


if __name__ == "__main__":
    cmd, args = sys.argv[1] if len(sys.argv) > 1 else "", sys.argv[2:]
    if cmd == "compare" and len(args) == 2:
        sys.exit(compare(*args))
    if cmd == "expect" and len(args) == 2:
        sys.exit(expect(*args))
    if cmd == "table" and len(args) == 1:
        sys.exit(table(*args))
    if cmd == "random" and len(args) == 4:
        sys.exit(random_set(*args))
    if cmd == "expect-random" and len(args) == 4:
        sys.exit(expect_random(*args))
    if cmd == "summary" and len(args) >= 2:
        sys.exit(summary(*args))
    if cmd == "summary-check" and len(args) >= 3:
        sys.exit(summary_check(*args))
    if cmd == "bug" and len(args) >= 2:
        sys.exit(bug(args[0], args[1:]))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
