"""The command line of an engine adapter (engines/*/adapter.py): replay a whole golden set through an
engine of the ringkv.replay protocol into an outputs folder for `ringkv check --outputs`.

    from ringkv.adapter import main
    main(lambda bug: MyEngine(bug), __doc__, {"window+1": "one key too many"})

    adapter.py GOLDEN_DIR OUT_DIR [--ringkv RINGKV] [--filter REGEX] [--bug NAME]

writes OUT_DIR/capabilities.json and OUT_DIR/<case>.safetensors for every case of the manifest (with
--ringkv: every case within capabilities.json, by ringkv's own rule; the others get no file and
`ringkv check` reports them not applicable): the engine's outputs, or "unsupported" with the reason
where the engine cannot run the case. A case whose manifest entry requires a capability the engine
does not declare (format 2: "rollback") gets no file either. Prints one line per case on stderr.
"""
import argparse
import os
import re
import sys
import time

from .check import cases_within
from .golden import read_manifest
from .outputs import write_capabilities
from .replay import capabilities_of, engine_name, replay


def main(make_engine, description, bugs):
    """make_engine(bug): the engine (bug: None or one of `bugs`, {name: what it plants})."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("golden", help="a golden set: a folder with manifest.json (golden/, or `ringkv golden generate --random`)")
    ap.add_argument("out", help="the outputs folder for `ringkv check --outputs`")
    ap.add_argument("--filter", default="", help="only cases whose name matches this regex")
    ap.add_argument("--bug", choices=sorted(bugs), help="plant a bug that ringkv check must catch: " +
                    "; ".join(f"{k}: {v}" for k, v in sorted(bugs.items())))
    ap.add_argument("--ringkv", help="the ringkv binary: only the cases `ringkv golden list --capabilities` puts within "
                    "capabilities.json get an outputs file (the others are not applicable); without it every case gets one")
    args = ap.parse_args()
    engine = make_engine(args.bug)
    if args.bug:
        engine.name = engine_name(engine) + " [planted bug " + args.bug + "]"
    caps = capabilities_of(engine)
    caps_file = write_capabilities(args.out, engine_name(engine), caps)
    within = cases_within(caps_file, args.golden, args.ringkv) if args.ringkv else None
    manifest = read_manifest(args.golden)
    for entry in manifest:
        if args.filter and not re.search(args.filter, entry.name):
            continue
        path = os.path.join(args.out, entry.name + ".safetensors")
        lacking = [c for c in entry.required_capabilities if not caps.get(c)]
        if (within is not None and entry.name not in within) or lacking:
            if os.path.exists(path):
                os.remove(path)
            why = f"requires {', '.join(lacking)}, spec {entry.requires.get('spec', '?')}" if lacking \
                else "outside capabilities.json"
            print(f"{entry.name}: not applicable ({why})", file=sys.stderr)
            continue
        start = time.time()
        result = replay(manifest.load(entry), engine, args.out)
        if result.unsupported:
            print(f"{entry.name}: unsupported ({result.unsupported})", file=sys.stderr)
        else:
            print(f"{entry.name}: ran in {time.time() - start:.2f} s", file=sys.stderr)
