#!/usr/bin/env python3
"""ctest cli.html_report (issue 28): `ringkv check --html` and `ringkv report merge --html` write one
self-contained page a person reads: the verdict first, then each failure with its reproduce line, a
line per engine, and the engines x boundary classes matrix. Parsed back with html.parser and checked
against the JSON report of the same run:

- the verdict element says the run's verdict, and comes before everything else in the body;
- every failing case of the JSON report is on the page with its exact reproduce line, every failing
  property with its report;
- the matrix has a row per engine of the JSON report's coverage and a cell per class whose state is
  the class's coverage (judged, failed, n/a, not judged);
- nothing is fetched (no script, link, img, iframe, no src or href to elsewhere);
- the merged page of two shards is the unsharded run's page.

usage: html_report_test.py RINGKV MUTANT_PLUGIN WORK_DIR
"""
import html.parser
import json
import os
import shutil
import subprocess
import sys

ringkv, mutant, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []


class Page(html.parser.HTMLParser):
    """The parts of the page the test reads: texts by element id and class, the matrix's cells."""

    def __init__(self):
        super().__init__()
        self.stack = []  # (tag, attrs) of the open elements
        self.texts = []  # (tag, id, class, text) of every text node, in page order
        self.cells = []  # (row's first cell text, data-class, css class, text) of the matrix
        self.row = None
        self.fetching = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "link", "img", "iframe", "object", "embed") or "src" in a or (
                "href" in a and not a["href"].startswith("#")):
            self.fetching.append((tag, a))
        if tag == "tr" and any(t == "table" and d.get("id") == "coverage" for t, d in self.stack):
            self.row = []
            self.cells_row = []
        if tag in ("br", "meta"):
            return
        self.stack.append((tag, a))

    def handle_endtag(self, tag):
        while self.stack:
            t, a = self.stack.pop()
            if t == tag:
                break
        if tag == "tr" and self.row is not None:
            self.cells.extend((self.row[0], *c) for c in self.cells_row if self.row)
            self.row = None

    def handle_data(self, data):
        if not self.stack:
            return
        tag, a = self.stack[-1]
        self.texts.append((tag, a.get("id"), a.get("class"), data))
        if self.row is not None and tag == "td":
            if "data-class" in a:
                self.cells_row.append((a["data-class"], a.get("class"), data))
            else:
                self.row.append(data)


def parse(path):
    with open(path, encoding="utf-8") as f:
        p = Page()
        p.feed(f.read())
    return p


def run(*args, rc=None):
    proc = subprocess.run([ringkv, *args], capture_output=True, text=True, timeout=600)
    if rc is not None and proc.returncode != rc:
        sys.exit(f"FAILED: ringkv {' '.join(args)} exited {proc.returncode}, expected {rc}\n{proc.stdout}{proc.stderr}")
    return proc


def check_page(name, page_path, json_path, verdict):
    page = parse(page_path)
    with open(json_path) as f:
        report = json.load(f)
    body_texts = [t for t in page.texts if t[0] not in ("title", "style") and t[3].strip()]
    first = next((t for t in body_texts if t[1] == "verdict"), None)
    if first is None or first[3] != verdict:
        failures.append(f"{name}: the verdict element says {first and first[3]!r}, expected {verdict}")
    elif body_texts.index(first) > 1:  # only the page's heading before it
        failures.append(f"{name}: the verdict is not at the top: {body_texts[:3]}")
    pres = [t[3] for t in page.texts if t[0] == "pre"]
    for c in report.get("cases", []):
        if c["status"] in ("failed", "xpass") and c["reproduce"] not in pres:
            failures.append(f"{name}: the failure {c['name']} has no reproduce line {c['reproduce']!r} on the page")
    for p in report.get("properties", []):
        if not p["passed"] and p["report"] not in pres:
            failures.append(f"{name}: the failing property {p['name']} has no report on the page")
    expected = {}
    for cov in report.get("coverage", []):
        failed_classes = {k for c in report["cases"] if c["engine"] == cov["engine"] and c["status"] in ("failed", "xpass")
                          for k in c["classes"]}
        for k in cov["classes"]:
            state = {"judged": "judged", "not applicable": "na", "not judged": "notjudged"}[k["status"]]
            if state == "judged" and k["class"] in failed_classes:
                state = "failed"
            expected[(cov["engine"], k["class"])] = state
    got = {(row, cls): css for row, cls, css, _ in page.cells}
    if got != expected or not expected:
        wrong = sorted(k for k in set(got) | set(expected) if got.get(k) != expected.get(k))[:5]
        failures.append(f"{name}: the matrix differs from the JSON coverage ({len(got)} cells, {len(expected)} expected), e.g. "
                        + ", ".join(f"{k}: {got.get(k)} against {expected.get(k)}" for k in wrong))
    if page.fetching:
        failures.append(f"{name}: the page fetches: {page.fetching[:3]}")
    return page


base = os.path.join(work, "mutant")
run("check", "--quiet", "--engine", "reference", "--engine", mutant, "--properties", "--cases", "10", "--shrink-time", "0",
    "--filter", "decode|sinks|^OracleEquality$|^Rollback$", "--json", base + ".json", "--html", base + ".html", rc=1)
page = check_page("failing run", base + ".html", base + ".json", "FAILED")
if not any(t[0] == "pre" and t[2] == "reproduce" for t in page.texts):
    failures.append("failing run: no reproduce line on the page at all")

base = os.path.join(work, "passing")
run("check", "--quiet", "--engine", "reference", "--engine", "cuda-plan", "--json", base + ".json", "--html", base + ".html", rc=0)
check_page("passing run", base + ".html", base + ".json", "PASSED")
shards = []
for i in (1, 2):
    shards.append(os.path.join(work, f"shard{i}.json"))
    run("check", "--quiet", "--engine", "reference", "--engine", "cuda-plan", "--shard", f"{i}/2", "--json", shards[-1])
run("report", "merge", *shards, "--html", os.path.join(work, "merged.html"), rc=0)
with open(base + ".html") as a, open(os.path.join(work, "merged.html")) as b:
    if a.read() != b.read():
        failures.append(f"the merged page differs from the unsharded one: diff {base}.html {work}/merged.html")

if failures:
    sys.exit("FAILED:\n" + "\n\n".join(failures))
print("PASSED")
