#!/usr/bin/env python3
"""An example engine in numpy, checked by `ringkv check --outputs` (file exchange), written on the
ringkv Python package (python/, `pip install` it or put python/src on PYTHONPATH).

    python3 numpy_engine.py GOLDEN_DIR OUT_DIR [--bug window+1] [--write-internals]
    ringkv check --outputs OUT_DIR --golden GOLDEN_DIR

The engine is ringkv.examples.numpy_engine (python/src/ringkv/examples/numpy_engine.py): its own ring
KV cache of ringkv spec 1.1 (docs/spec.md) behind the replay protocol of ringkv.replay (start, reset,
rollback, append). It computes in float64 (K rotated in f64, rounded once to f32, then stored as the
config says), so it declares the default profile (f32 everywhere, f64 RoPE), and it refuses
rollbacks by spec 1.1's honour rule. This script is what a user writes around an engine: read the
golden set, replay every case, write the outputs files (golden-format §7) and capabilities.json.
--bug plants an off-by-one window, which `ringkv check` must catch. --write-internals also writes
its rotated q and k ("q_rot", "k_rot") and its stored cache per row ("k_stored", "v_stored", and for
INT8 "*_codes" and "*_scales"), which ringkv checks on their own (golden-format §7).
With pytest instead: pytest --ringkv-engine ringkv.examples.numpy_engine:make_engine
"""
import argparse
import sys

import ringkv
from ringkv.examples.numpy_engine import NumpyEngine


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("golden")
    ap.add_argument("out")
    ap.add_argument("--bug", choices=["window+1"], help="plant a bug that ringkv check must catch")
    ap.add_argument("--write-internals", action="store_true",
                    help="also write q_rot, k_rot and the stored cache per row (golden-format §7)")
    args = ap.parse_args()
    engine = NumpyEngine(window_error=1 if args.bug else 0, internals=args.write_internals)
    ringkv.write_capabilities(args.out, engine.name, engine.capabilities())
    manifest = ringkv.read_manifest(args.golden)
    for entry in manifest:
        ringkv.replay(manifest.load(entry), engine, args.out)
        print(entry.name, file=sys.stderr)


if __name__ == "__main__":
    main()
