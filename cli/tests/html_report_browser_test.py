#!/usr/bin/env python3
"""ctest cli.html_report_browser (issue 28 item 5): the HTML pages of `ringkv check --html` and of
`ringkv report merge --html`, loaded in a real headless browser (Debian's chromium, installed by
scripts/install-engines.sh) and read back as it rendered them, against the JSON report of the same run.

chromium runs headless with --no-sandbox (it runs as root in CI), a fresh --user-data-dir, every host
name resolving to nothing, and is driven over --remote-debugging-pipe (the DevTools protocol on file
descriptors 3 and 4: no port, no Python package). The test loads the page, records every request the
page makes, and reads back the rendered page: innerText (the text as laid out, after CSS), each
element's computed background and box. The run: the reference, a core-only plugin (n/a classes) and a
failing mutant plugin, with properties, a --filter that leaves classes not judged, and a
--require-classes no engine meets, so the page holds all four cell states, failures and reasons.

- the only request is the page's own file, once it has loaded and laid out its fonts, and the page
  names no URL (src, href and the like, url() or @import in its style): nothing is fetched;
- the verdict is the run's, at the top of the first screen, above the failures and the matrix;
- every failing case is shown with its case id and its exact reproduce line, every failing property
  with its report, and every reason the run failed (the coverage verdict);
- the engines table, read by its rendered column headings, says each engine's verdict, counts,
  worst error / bound and coverage line, as computed from the JSON report;
- the matrix, read as a person reads it (row label x column heading, not the cells' data attributes):
  each cell's text is the JSON coverage's state for that engine and class (the worst error / bound
  of the class's cases where judged, "failed N" where N cases carrying it failed, "n/a", "not
  judged"); every cell is laid out with a box; the cells of one state share one background colour
  and the four states have four different colours;
- the merged page of two shards reads back as the unsharded page.

If chromium is not found the test fails, saying to run scripts/install-engines.sh (CI installs it).
$RINGKV_CHROMIUM names another browser binary.

usage: html_report_browser_test.py RINGKV MUTANT_PLUGIN CORE_PLUGIN WORK_DIR
"""
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_mask import masked_text  # noqa: E402

ringkv, mutant, core, work = sys.argv[1:5]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []
BROWSER_TIMEOUT = 60  # seconds for one browser session: start, load, read back, close

chromium = os.environ.get("RINGKV_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
if not chromium:
    sys.exit("FAILED: chromium not found on PATH: this test loads the HTML report in a real headless browser; "
             "scripts/install-engines.sh installs Debian's chromium (apt-get install chromium), or set RINGKV_CHROMIUM")


class Browser:
    """One headless chromium driven over the DevTools protocol on a pipe (fd 3: to it, fd 4: from it;
    each message JSON ended by a NUL byte)."""

    def __init__(self, log_path):
        self.profile = tempfile.mkdtemp(prefix="ringkv-chromium-")
        self.deadline = time.monotonic() + BROWSER_TIMEOUT
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        # Moved to free descriptors from 10 up first, so that the dup2 onto 3 and 4 in the child cannot
        # clobber one of them.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child_r, from_child_w)]
        for fd in (to_child_r, from_child_w):
            os.close(fd)

        def fds():
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + self.profile,
             "--remote-debugging-pipe", "--host-resolver-rules=MAP * ~NOTFOUND", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--window-size=1280,900", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=fds, pass_fds=(3, 4))
        for fd in high:
            os.close(fd)
        self.buffer = b""
        self.events = []
        self.next_id = 0

    def _read_message(self):
        while b"\0" not in self.buffer:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"chromium did not answer within {BROWSER_TIMEOUT} s")
            ready, _, _ = select.select([self.from_child], [], [], left)
            if ready:
                chunk = os.read(self.from_child, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe (exit code {self.proc.poll()})")
                self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_child, json.dumps(message).encode() + b"\0")
        while True:
            m = self._read_message()
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"chromium: {method}: {m['error']}")
                return m["result"]
            self.events.append(m)

    def wait_event(self, method, session):
        while True:
            for i, m in enumerate(self.events):
                if m.get("method") == method and m.get("sessionId") == session:
                    return self.events.pop(i)
            self.events.append(self._read_message())

    def close(self):
        try:
            if self.proc.poll() is None:
                try:
                    self.deadline = time.monotonic() + 5
                    self.send("Browser.close")
                except Exception:  # noqa: BLE001 - it is going away either way
                    pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        finally:
            os.close(self.to_child)
            os.close(self.from_child)
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)


# Read back in the page, as rendered: texts are innerText (laid out, CSS applied), colours computed.
READ_BACK = r"""(async () => {
  await document.fonts.ready;  // a web font is fetched at layout: wait for it, so that its request is recorded
  // Every URL the page names that would leave it: attributes, and url()/@import in its style.
  const urls = [];
  for (const e of document.querySelectorAll('*'))
    for (const a of e.attributes)
      if (/^(src|href|srcset|poster|data|action|background)$/i.test(a.name) && !a.value.startsWith('#')) urls.push(a.value);
  for (const s of document.styleSheets) {
    if (s.href) urls.push(s.href);
    let rules = [];
    try { rules = s.cssRules; } catch (e) { continue; }  // another origin's sheet: its href is listed
    for (const r of rules) if (/url\(|@import/.test(r.cssText)) urls.push(r.cssText);
  }
  const box = e => { const r = e.getBoundingClientRect(); return {top: r.top, width: r.width, height: r.height}; };
  const text = e => e.innerText.trim();
  const table = id => {
    const t = document.getElementById(id);
    if (!t) return null;
    const rows = [...t.rows];
    return {head: [...rows[0].cells].map(text),
            rows: rows.slice(1).map(r => [...r.cells].map(c => ({text: text(c), bg: getComputedStyle(c).backgroundColor,
                                                              box: box(c)})))};
  };
  const v = document.getElementById('verdict');
  const failures = [...document.querySelectorAll('.failure')];
  return {
    urls,
    verdict: v && {text: text(v), box: box(v), bg: getComputedStyle(v).backgroundColor},
    viewport: window.innerHeight,
    failures: failures.map(f => ({text: f.innerText, box: box(f),
                                  reproduce: [...f.querySelectorAll('pre.reproduce')].map(p => p.innerText)})),
    reasons: [...document.querySelectorAll('pre.reason')].map(p => p.innerText),
    engines: table('engines'),
    coverage: table('coverage'),
    coverage_top: document.getElementById('coverage') ? box(document.getElementById('coverage')).top : null,
  };
})()"""


def render(name, page_path):
    """Loads the page in chromium; returns what it rendered and every URL the page requested."""
    url = "file://" + urllib.parse.quote(os.path.abspath(page_path))
    browser = Browser(os.path.join(work, name + ".chromium.log"))
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        browser.send("Network.enable", session=session)
        browser.send("Page.enable", session=session)
        browser.send("Page.navigate", {"url": url}, session=session)
        browser.wait_event("Page.loadEventFired", session)
        result = browser.send("Runtime.evaluate", {"expression": READ_BACK, "returnByValue": True, "awaitPromise": True}, session=session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"the read-back script failed: {result['exceptionDetails']}")
        requests = [m["params"]["request"]["url"] for m in browser.events
                    if m.get("method") == "Network.requestWillBeSent" and m.get("sessionId") == session]
        return url, result["result"]["value"], requests
    except Exception as e:  # noqa: BLE001 - reported with chromium's log
        with open(os.path.join(work, name + ".chromium.log"), errors="replace") as f:
            log = f.read()[-3000:]
        sys.exit(f"FAILED: {name}: chromium ({chromium}) on {url}: {e}\nits log (the end):\n{log}")
    finally:
        browser.close()


def run(*args, rc):
    proc = subprocess.run([ringkv, *args], capture_output=True, text=True, timeout=600)
    if proc.returncode != rc:
        sys.exit(f"FAILED: ringkv {' '.join(args)} exited {proc.returncode}, expected {rc}\n{proc.stdout}{proc.stderr}")


def g3(x):
    return "%.3g" % x  # the page's ratio(): printf %.3g


def expected_from_json(report):
    """What the page must show, computed from the JSON report: per engine its table row, per
    engine and class its cell (state, text)."""
    per_class, per_engine = {}, {}
    counts = lambda: {"passed": 0, "failed": 0, "xfail": 0, "skipped": 0, "error": 0, "worst": 0.0, "props": 0,
                      "props_failed": 0}
    for c in report["cases"]:
        n = per_engine.setdefault(c["engine"], counts())
        st = c["status"]
        n[{"passed": "passed", "failed": "failed", "xpass": "failed", "xfail": "xfail",
           "skipped": "skipped"}.get(st, "error")] += 1
        if st in ("skipped", "error"):
            continue
        n["worst"] = max(n["worst"], c.get("worst_ratio", 0.0))
        for k in c["classes"]:
            pc = per_class.setdefault((c["engine"], k), [0, 0.0])
            pc[0] += st in ("failed", "xpass")
            pc[1] = max(pc[1], c.get("worst_ratio", 0.0))
    for p in report["properties"]:
        n = per_engine.setdefault(p["engine"], counts())
        n["props"] += 1
        n["props_failed"] += not p["passed"]
    coverage = {c["engine"]: c for c in report["coverage"]}
    rows = {}
    for e in report["engines"]:
        label = e["engine"]
        n = per_engine.get(label, counts())
        cov = coverage.get(label, {})
        verdict = {"ran": "PASSED", "unloadable": "ERROR"}.get(e["availability"], "skipped")
        if e["availability"] == "ran" and (n["failed"] or n["props_failed"] or cov.get("missing")):
            verdict = "FAILED"
        elif e["availability"] == "ran" and n["error"]:
            verdict = "ERROR"
        line = cov.get("line", "") if e["availability"] == "ran" else e.get("reason", "")
        rows[label] = {"engine": label, "verdict": verdict, "golden passed": str(n["passed"]),
                       "failed": str(n["failed"]), "xfail": str(n["xfail"]), "skipped": str(n["skipped"]),
                       "unusable": str(n["error"]), "worst error / bound": g3(n["worst"]),
                       "properties failed": f"{n['props_failed']} of {n['props']}", "coverage": line}
    cells = {}
    for cov in report["coverage"]:
        for k in cov["classes"]:
            failed, worst = per_class.get((cov["engine"], k["class"]), (0, 0.0))
            if k["status"] == "judged":
                cells[(cov["engine"], k["class"])] = ("failed", f"failed {failed}") if failed else ("judged", g3(worst))
            else:
                cells[(cov["engine"], k["class"])] = {"not applicable": ("na", "n/a"),
                                                      "not judged": ("notjudged", "not judged")}[k["status"]]
    return rows, cells


def check_page(name, page_path, json_path, verdict, states):
    url, page, requests = render(name, page_path)
    with open(json_path) as f:
        report = json.load(f)
    wrong = []

    # Nothing fetched: the page's own file is its only request.
    if requests != [url]:
        wrong.append(f"the page made requests besides its own file {url}: {requests}")
    if page["urls"]:
        wrong.append(f"the page names URLs to fetch: {page['urls'][:3]}")

    # The verdict, first and on the first screen.
    v = page["verdict"]
    if not v or v["text"] != verdict:
        wrong.append(f"the verdict reads {v and v['text']!r}, expected {verdict}")
    elif not (v["box"]["height"] > 0 and 0 <= v["box"]["top"] < page["viewport"]):
        wrong.append(f"the verdict is not on the first screen: {v['box']} (viewport height {page['viewport']})")
    elif any(f["box"]["top"] <= v["box"]["top"] for f in page["failures"]) or (
            page["coverage_top"] is not None and page["coverage_top"] <= v["box"]["top"]):
        wrong.append("a failure or the matrix is rendered above the verdict")

    # The failures: each failing case with its case id and reproduce line, each failing property with its report.
    for c in report["cases"]:
        if c["status"] not in ("failed", "xpass"):
            continue
        shown = [f for f in page["failures"] if f"FAILED {c['name']} [{c['status']}] on engine {c['engine']}" in f["text"]]
        if len(shown) != 1:
            wrong.append(f"the failure {c['name']} on {c['engine']} is shown {len(shown)} times")
        elif f"case: {c['id']}" not in shown[0]["text"] or shown[0]["reproduce"] != [c["reproduce"]]:
            wrong.append(f"the failure {c['name']} on {c['engine']} reads {shown[0]['text']!r}, expected its case "
                         f"{c['id']!r} and the reproduce line {c['reproduce']!r}")
    for p in report["properties"]:
        if p["passed"]:
            continue
        shown = [f for f in page["failures"] if f"FAILED property {p['name']} on engine {p['engine']}" in f["text"]]
        if len(shown) != 1 or shown[0]["reproduce"] != [p["report"]]:
            wrong.append(f"the failing property {p['name']} on {p['engine']} is not shown once with its report")
    if not any(f["reproduce"] for f in page["failures"]) and verdict == "FAILED":
        wrong.append("no reproduce line on the page at all")

    # The coverage verdict: the reasons the run failed beyond its cases, and each engine's coverage line.
    if page["reasons"] != report["reasons"]:
        wrong.append(f"the reasons read {page['reasons']!r}, expected the JSON report's {report['reasons']!r}")
    rows, cells = expected_from_json(report)
    t = page["engines"]
    got_rows = {r[0]["text"]: dict(zip(t["head"], (c["text"] for c in r))) for r in t["rows"]} if t else {}
    if got_rows != rows:
        bad = [e for e in set(rows) | set(got_rows) if rows.get(e) != got_rows.get(e)]
        wrong.append("the engines table differs from the JSON report: "
                     + "; ".join(f"{e}: read {got_rows.get(e)}, expected {rows.get(e)}" for e in bad[:3]))

    # The matrix, by rendered row label and column heading.
    m = page["coverage"]
    got, colour = {}, {}
    if not m or m["head"][0] != "engine":
        wrong.append(f"no engines x classes matrix with an 'engine' column: {m and m['head'][:3]}")
    else:
        state_of_text = lambda s: ("na" if s == "n/a" else "notjudged" if s == "not judged"
                                   else "failed" if s.startswith("failed ") else "judged")
        for r in m["rows"]:
            engine = r[0]["text"]
            if len(r) != len(m["head"]):
                wrong.append(f"the matrix row of {engine} has {len(r)} cells under {len(m['head'])} headings")
            for heading, cell in zip(m["head"][1:], r[1:]):
                got[(engine, heading)] = (state_of_text(cell["text"]), cell["text"])
                colour.setdefault(state_of_text(cell["text"]), set()).add(cell["bg"])
                if not (cell["box"]["width"] > 0 and cell["box"]["height"] > 0):
                    wrong.append(f"the matrix cell {engine} x {heading} is not laid out: {cell['box']}")
        if got != cells:
            bad = sorted(k for k in set(got) | set(cells) if got.get(k) != cells.get(k))
            wrong.append(f"the matrix reads back other than the JSON coverage ({len(got)} cells read, {len(cells)} "
                         f"expected; {len(bad)} differ), e.g. "
                         + ", ".join(f"{k}: read {got.get(k)}, expected {cells.get(k)}" for k in bad[:5]))
        if set(colour) != set(states):
            wrong.append(f"the matrix shows the states {sorted(colour)}, this run needs {sorted(states)}")
        for state, bgs in colour.items():
            if len(bgs) != 1 or bgs & {"rgba(0, 0, 0, 0)", "rgb(255, 255, 255)"}:
                wrong.append(f"the {state} cells are not one visible colour: {sorted(bgs)}")
        if len({next(iter(b)) for b in colour.values()}) != len(colour):
            wrong.append(f"two states share a colour: {colour}")
    if wrong:
        failures.append(f"{name} ({page_path}):\n  " + "\n  ".join(wrong))
    return page


# A failing run whose matrix has every state: the reference (judged), a core-only plugin (n/a; the filter
# leaves most of its classes not judged), the mutant (failed); --require-classes no engine meets (reasons).
args = ["--engine", "reference", "--engine", core, "--engine", mutant, "--properties", "--cases", "10",
        "--shrink-time", "0", "--filter", "decode|sinks|^OracleEquality$|^Rollback$",
        "--require-classes", "^rollback-repeated$"]
base = os.path.join(work, "unsharded")
run("check", "--quiet", *args, "--json", base + ".json", "--html", base + ".html", rc=1)
states = {"judged", "failed", "na", "notjudged"}
unsharded = check_page("check --html", base + ".html", base + ".json", "FAILED", states)

shards = []
for i in (1, 2):
    shards.append(os.path.join(work, f"shard{i}.json"))
    run("check", "--quiet", *args, "--shard", f"{i}/2", "--json", shards[-1], rc=1)
merged = os.path.join(work, "merged")
run("report", "merge", *shards, "--json", merged + ".json", "--html", merged + ".html", rc=1)
merged_page = check_page("report merge --html", merged + ".html", merged + ".json", "FAILED", states)


def as_read(page):
    """What a reader sees, timings masked, without the layout boxes (a timing's digits may wrap a line),
    the reasons in their order (both list them in the run's engine order)."""
    cells = lambda t: t and [[(c["text"], c["bg"]) for c in r] for r in t["rows"]]
    return {"verdict": page["verdict"]["text"], "reasons": page["reasons"],
            "failures": [(masked_text(f["text"]), [masked_text(r) for r in f["reproduce"]]) for f in page["failures"]],
            "engines": cells(page["engines"]), "coverage": cells(page["coverage"]),
            "headings": page["coverage"] and page["coverage"]["head"]}


if as_read(merged_page) != as_read(unsharded):
    a, b = as_read(unsharded), as_read(merged_page)
    failures.append("the merged page reads back other than the unsharded page: "
                    + ", ".join(k for k in a if a[k] != b[k]))

if failures:
    sys.exit("FAILED:\n" + "\n\n".join(failures))
print(f"PASSED: {len(unsharded['coverage']['rows'])} engines x {len(unsharded['coverage']['head']) - 1} classes, "
      f"{len(unsharded['failures'])} failures, read back from {chromium}")
