"""The pytest plugin of ringkv (registered through the `pytest11` entry point of the package).

    pytest --ringkv-engine mymodule:make_engine [--ringkv-golden DIR] [--ringkv-random N [--ringkv-seed S]]
           [--ringkv-scale TIER] [--ringkv PATH] [--ringkv-filter REGEX]

makes one test per golden case (and, with --ringkv-random N, per case of a random set generated for
seed S within the engine's capabilities; with --ringkv-scale TIER, per scale case of the tier, generated
by `ringkv golden generate --scale` and judged on its sampled rows, docs/scale.md), named by the case
name (`-k decode_w8` selects one). Each
test replays its case through the engine (ringkv.replay: `factory()` returns an object of that
protocol) into its own outputs folder and runs `ringkv check --outputs` on it:

- "passed": the test passes;
- not applicable (outside the engine's capabilities) or unsupported (the engine says why): skipped,
  with the reason;
- "failed": the test fails with the worst error, the first failing output, the case's boundary
  classes and the command that reproduces it; the case id is in the message and in the test's
  user_properties (JUnit).

MODULE is imported from sys.path, else from the folder pytest runs in or its rootdir (as pytest finds a
conftest.py there): bare `pytest` next to mymodule.py finds it, as `python -m pytest` does.
Without --ringkv-engine the plugin adds nothing. --ringkv-golden defaults to the installed CLI's own
golden set (share/ringkv/golden next to bin/ringkv); the CLI comes from --ringkv, $RINGKV, the CLI the
platform wheel bundles, or PATH.
"""
import importlib
import os
import re
import sys

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("ringkv", "ringkv conformance checks of an engine (docs: ringkv.pytest_plugin)")
    group.addoption("--ringkv-engine", metavar="MODULE:FACTORY",
                    help="check this engine: FACTORY() in MODULE returns an object of the ringkv.replay protocol")
    group.addoption("--ringkv-golden", metavar="DIR",
                    help="golden set folder (manifest.json); default: the installed ringkv's own set")
    group.addoption("--ringkv-random", metavar="N", type=int, default=0,
                    help="also N random cases (ringkv golden generate --random N) within the engine's capabilities")
    group.addoption("--ringkv-seed", metavar="S", type=int, default=1, help="seed of --ringkv-random (default 1)")
    group.addoption("--ringkv-scale", metavar="TIER",
                    help="also the scale cases of this tier (ci, host, gpu, gpu-long), judged on sampled rows")
    group.addoption("--ringkv", metavar="PATH", help="the ringkv CLI (default: $RINGKV, else the wheel's bundled CLI, else ringkv on PATH)")
    group.addoption("--ringkv-filter", metavar="REGEX", help="only the cases whose name matches this regex")


def load_factory(spec, search_dirs=()):
    """MODULE:FACTORY -> the callable. Raises pytest.UsageError with what is wrong.

    MODULE is imported from sys.path and, when it is not found there, from search_dirs (the folder
    pytest runs in, then its rootdir): bare `pytest` does not put the current folder on sys.path
    (`python -m pytest` does), yet `pytest --ringkv-engine=my_engine:make_engine` next to my_engine.py
    must find it, as pytest finds a conftest.py there."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise pytest.UsageError(f"--ringkv-engine {spec}: expected MODULE:FACTORY, e.g. mymodule:make_engine")
    try:
        module = _import_engine_module(module_name, search_dirs)
    except ImportError as e:
        not_found = isinstance(e, ModuleNotFoundError) and e.name == module_name.split(".")[0]
        where = f" (searched sys.path{''.join(f', {d}' for d in _new_dirs(search_dirs))})" if not_found else ""
        raise pytest.UsageError(f"--ringkv-engine {spec}: cannot import {module_name}: {e}{where}") from None
    factory = module
    for part in attr.split("."):
        factory = getattr(factory, part, None)
    if not callable(factory):
        raise pytest.UsageError(f"--ringkv-engine {spec}: {module_name} has no callable {attr}")
    return factory


def _new_dirs(search_dirs):
    """The search_dirs not on sys.path yet (absolute, each once, in order)."""
    on_path = {os.path.abspath(p or os.curdir) for p in sys.path}
    dirs = []
    for d in map(os.path.abspath, map(str, search_dirs)):
        if d not in on_path and d not in dirs:
            dirs.append(d)
    return dirs


def _import_engine_module(module_name, search_dirs):
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        top = module_name.split(".")[0]
        dirs = [d for d in _new_dirs(search_dirs)
                if os.path.isfile(os.path.join(d, top + ".py")) or os.path.isdir(os.path.join(d, top))]
        if e.name != top or not dirs:  # not found anywhere, or a module the engine imports is missing
            raise
        sys.path.insert(0, dirs[0])  # kept: the engine may import its neighbours later, as under python -m pytest
        importlib.invalidate_caches()
        return importlib.import_module(module_name)


class CaseSet:
    """One golden set the session checks: its folder, manifest and the cases within the capabilities."""

    def __init__(self, label, golden_dir, caps_file, ringkv, scale=None):
        from .check import cases_within
        from .golden import read_manifest
        self.label, self.dir, self.scale = label, golden_dir, scale  # scale: the tier of a scale set
        self.manifest = read_manifest(golden_dir)
        self.within = cases_within(caps_file, golden_dir, ringkv)


class RingkvSession:
    """What every item shares: the engine, its capabilities file, the CLI and the scratch folder."""

    def __init__(self, config):
        from .check import default_golden_dir, find_ringkv, generate_random, generate_scale
        from .errors import RingkvError
        from .outputs import write_capabilities
        from .replay import capabilities_of, engine_name
        opt = config.getoption
        self.factory = load_factory(opt("--ringkv-engine"), (config.invocation_params.dir, config.rootpath))
        try:
            self.engine = self.factory()
            self.ringkv = find_ringkv(opt("--ringkv"))
            golden = opt("--ringkv-golden") or default_golden_dir(self.ringkv)
            self.tmp = _scratch(config)
            self.caps_file = write_capabilities(str(self.tmp), engine_name(self.engine), capabilities_of(self.engine))
            self.sets = [CaseSet("golden", golden, self.caps_file, self.ringkv)]
            n = opt("--ringkv-random")
            if n < 0:
                raise pytest.UsageError(f"--ringkv-random {n}: must be 0 or more")
            if n:
                out = os.path.join(str(self.tmp), f"random-{n}-seed-{opt('--ringkv-seed')}")
                generate_random(out, n, opt("--ringkv-seed"), self.caps_file, self.ringkv)
                self.sets.append(CaseSet("random", out, self.caps_file, self.ringkv))
            tier = opt("--ringkv-scale")
            if tier:
                out = generate_scale(os.path.join(str(self.tmp), f"scale-{tier}"), tier, ringkv=self.ringkv)
                self.sets.append(CaseSet("scale", out, self.caps_file, self.ringkv, scale=tier))
        except RingkvError as e:
            raise pytest.UsageError(f"ringkv: {e}") from None
        pattern = opt("--ringkv-filter")
        try:
            self.filter = re.compile(pattern) if pattern else None
        except re.error as e:
            raise pytest.UsageError(f"--ringkv-filter {pattern}: bad regex: {e}") from None


def pytest_configure(config):
    config.addinivalue_line("markers", "ringkv: a ringkv conformance case (added by --ringkv-engine)")


def _scratch(config):
    """A scratch folder for the outputs (pytest's basetemp: kept after the run, for the reproduce lines)."""
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is not None:
        return factory.mktemp("ringkv", numbered=True)
    import tempfile
    return tempfile.mkdtemp(prefix="pytest-ringkv-")


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselect items
def pytest_collection_modifyitems(session, config, items):
    if not config.getoption("--ringkv-engine"):
        return
    rs = RingkvSession(config)
    config.stash[_SESSION] = rs
    for case_set in rs.sets:
        name = f"ringkv-{case_set.label}"  # node ids ringkv-golden::<case name>, ringkv-random::<case name>
        collector = RingkvSet.from_parent(session, name=name, nodeid=name, case_set=case_set)
        added = []
        for entry in case_set.manifest:
            if rs.filter and not rs.filter.search(entry.name):
                continue
            item = RingkvCase.from_parent(collector, name=entry.name, entry=entry, case_set=case_set)
            item.add_marker("ringkv")
            added.append(item)
        # Reported as collected (the terminal's "collected N items" counts them), then kept for -k/-m.
        session.ihook.pytest_collectreport(report=pytest.CollectReport(collector.nodeid, "passed", None, added))
        items.extend(added)


_SESSION = pytest.StashKey()


class RingkvSet(pytest.Collector):
    """The cases of one golden set (their items are added at collection)."""

    def __init__(self, *, case_set, **kwargs):
        super().__init__(**kwargs)
        self.case_set = case_set

    def collect(self):
        return []


class RingkvCase(pytest.Item):
    """One golden case: replay it through the engine, then `ringkv check --outputs` it."""

    def __init__(self, *, entry, case_set, **kwargs):
        super().__init__(**kwargs)
        self.entry, self.case_set = entry, case_set
        self.user_properties.append(("ringkv_case_id", entry.id))

    def runtest(self):
        from .check import check, verdict_of
        from .replay import replay
        rs = self.config.stash[_SESSION]
        out_dir = os.path.join(str(rs.tmp), self.case_set.label, self.entry.name)
        os.makedirs(out_dir, exist_ok=True)
        if self.entry.name in self.case_set.within:
            replay(self.case_set.manifest.load(self.entry), rs.engine, out_dir)
        tier = self.case_set.scale
        # A scale case's file scale_<tier>_<shape> holds the report's scale/<tier>/<shape>.
        name = self.entry.name.replace(f"scale_{tier}_", f"scale/{tier}/", 1) if tier else self.entry.name
        report = check(out_dir, None if tier else self.case_set.dir, rs.ringkv, filter="^" + re.escape(name) + " ",
                       capabilities=rs.caps_file, scale=tier)
        cases = [c for c in report["cases"] if c["name"] == name]
        if len(cases) != 1:
            pytest.fail(f"ringkv check reported {len(cases)} results for {self.entry.name}:\n{report['output']}",
                        pytrace=False)
        outcome, message = verdict_of(cases[0])
        self.user_properties.append(("ringkv_reproduce", cases[0].get("reproduce", "")))
        if outcome in ("unsupported", "not applicable"):
            pytest.skip(message)
        if outcome == "xfail":
            pytest.xfail(message)
        if outcome != "passed":
            pytest.fail(message, pytrace=False)

    def reportinfo(self):
        return self.entry.file, None, f"ringkv {self.case_set.label} case {self.entry.name}"
