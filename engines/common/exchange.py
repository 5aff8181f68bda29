"""The file exchange of ringkv (docs/golden-format.md §1-§7, §10), shared by every adapter under engines/.

An adapter wraps a real engine. It reads each golden case (safetensors: tensors plus the case JSON
in the metadata), replays the case's schedule through the engine (resets, then one batch of chunks
per step, layer by layer), and writes one outputs file per case for `ringkv check --outputs`, plus
`capabilities.json` beside them saying what the engine can express (§10): a case outside needs no
file (it is "not applicable"), a case inside that the engine still cannot run gets a file with
"unsupported" and the reason.

An adapter supplies an object with:

    name                       the engine's name and version, e.g. "onnxruntime-1.32.0 GroupQueryAttention (CPU)"
    capabilities()             the capabilities JSON object (§10) without "format"/"name"
    unsupported(case)          None, or why the engine cannot run this case (asked of every case that gets a
                               file; inside the capabilities it makes the case "not judged")
    profile(case)              the precision profile (JSON object, golden-format §5) it declares for this case
    run(case, bug)             the outputs file's tensors: "out" [L][R][Hq][D] f32, and any internals it exposes;
                               an engine declaring "rollback" also returns "refused_steps" (the steps it refused)
"""
import argparse
import json
import os
import struct
import sys
import time

import numpy as np

DTYPES = {"F64": np.float64, "F32": np.float32, "I64": np.int64, "I32": np.int32, "I8": np.int8, "U8": np.uint8}


def read_safetensors(path):
    """(metadata dict, {name: read-only numpy array}) of a safetensors file (golden-format §1)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        tensors[name] = np.frombuffer(data[base + b:base + e], dtype=DTYPES[t["dtype"]]).reshape(t["shape"])
    return meta, tensors


def write_safetensors(path, tensors, meta):
    """Writes tensors (name order, contiguous offsets) and string metadata as ringkv does (§1)."""
    header, blobs, offset = {"__metadata__": meta}, [], 0
    names = {np.dtype(t): n for n, t in DTYPES.items()}
    for name in sorted(tensors):
        blob = np.ascontiguousarray(tensors[name]).tobytes()
        header[name] = {"dtype": names[tensors[name].dtype], "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


class Chunk:
    """The tokens one sequence appends in one step: rows b..b+n-1 (golden-format §3)."""

    def __init__(self, seq, b, n, index, position):
        self.seq, self.b, self.n = seq, b, n
        self.index = index        # index since the last reset of the first token
        self.position = position  # its true position p0 + index


class Step:
    def __init__(self, number, resets, chunks, rollbacks=(), refused=False):
        self.number = number
        self.rollbacks = list(rollbacks)  # [(sequence, n_tokens)], format 2 (spec 1.1): applied first
        self.resets = resets  # [(sequence, p0)], applied after the rollbacks, before the appends
        self.chunks = chunks  # [Chunk], one per sequence that appends (ascending sequence)
        # Format 2: the spec refuses this step's rollbacks (§5.1.2). An engine must refuse it too (and
        # change nothing) and list it in its outputs file's "refused_steps"; such a step has no chunks.
        self.refused = refused


class Case:
    """One golden case: its metadata, tensors, config and schedule."""

    def __init__(self, meta, tensors):
        self.meta, self.t = meta, tensors
        self.name, self.id = meta["name"], meta["id"]
        self.json = json.loads(meta["case"])
        cfg = self.config = self.json["config"]
        self.layers = cfg["layers"]
        self.L, self.Hq, self.Hkv, self.D = len(self.layers), cfg["num_q_heads"], cfg["num_kv_heads"], cfg["head_dim"]
        self.B, self.max_tokens = cfg["batch"], cfg["max_tokens"]
        self.scale = cfg["softmax_scale"] if cfg["softmax_scale"] is not None else 1.0 / np.sqrt(self.D)
        self.softcap = cfg["softcap"]
        self.sink_logits = cfg["sink_logits"]  # [L][Hq] or []
        self.k_dtype, self.v_dtype = cfg["k_format"]["dtype"], cfg["v_format"]["dtype"]

    def is_sliding(self, layer):
        """A layer's window slides when W < max_tokens (else it attends like full attention)."""
        return self.layers[layer]["window"] < self.max_tokens

    def max_position(self):
        return int(self.t["positions"].max()) if len(self.t["positions"]) else 0

    def format_version(self):
        """1, or 2 for a case with rollback events (spec 1.1, golden-format §12)."""
        return int(self.meta.get("golden_format_version", "1"))

    def requires_rollback(self):
        return "rollbacks" in self.t

    def steps(self):
        """The schedule, step by step: rollbacks (format 2), then resets, then the chunks of the step
        (golden-format §3, §12). An index taken back and appended again has a new row: the latest wins."""
        t = self.t
        resets = t["resets"] if "resets" in t else np.zeros((0, 4), np.int64)
        rollbacks = t["rollbacks"] if "rollbacks" in t else np.zeros((0, 4), np.int64)
        refused = t["refused"] if "refused" in t else np.zeros(t["schedule"].shape[0], np.int32)
        chunks = t["chunks"]
        for number in range(t["schedule"].shape[0]):
            rb = [(int(seq), int(n)) for s, seq, n, _ in rollbacks if s == number]
            rs = [(int(seq), int(p0)) for s, seq, p0, _ in resets if s == number]
            cs = [Chunk(int(seq), int(b), int(n), int(t["rows"][b][2]), int(t["positions"][b]))
                  for s, seq, b, n in chunks if s == number]
            yield Step(number, rs, sorted(cs, key=lambda c: c.seq), rb, bool(refused[number]))


def load_manifest(golden_dir):
    with open(os.path.join(golden_dir, "manifest.json")) as f:
        return json.load(f)


def write_outputs(path, case, engine_name, profile=None, tensors=None, unsupported=None, refused_steps=None):
    """refused_steps: the steps the engine refused (format 2: a refused rollback), ascending."""
    meta = {"format": "ringkv-golden-outputs", "name": case.name, "id": case.id, "engine": engine_name}
    if unsupported is not None:
        meta["unsupported"] = unsupported
        tensors = {}
    else:
        meta["profile"] = json.dumps(profile, sort_keys=True)
        if refused_steps:
            meta["refused_steps"] = json.dumps(sorted(int(s) for s in refused_steps))
    write_safetensors(path, tensors, meta)


def write_capabilities(out_dir, engine):
    """Writes OUT_DIR/capabilities.json (golden-format §10) and returns its path."""
    caps = {"format": "ringkv-capabilities", "name": engine.name}
    caps.update(engine.capabilities())
    path = os.path.join(out_dir, "capabilities.json")
    with open(path, "w") as f:
        json.dump(caps, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def cases_within(ringkv, golden_dir, caps_file):
    """The names of the cases within a capabilities file, by ringkv's own rule (`ringkv golden list`)."""
    import subprocess
    listing = subprocess.run([ringkv, "golden", "list", "--golden", golden_dir, "--capabilities", caps_file],
                             check=True, capture_output=True, text=True).stdout
    return {line.split()[0] for line in listing.splitlines() if line.strip() and not line.startswith("#")}


def main(engine, description, bugs):
    """The command line every adapter shares:

        adapter.py GOLDEN_DIR OUT_DIR [--ringkv RINGKV] [--filter REGEX] [--bug NAME]

    writes OUT_DIR/capabilities.json and OUT_DIR/<case>.safetensors for every case of the manifest
    (with --ringkv: every case within capabilities.json, by ringkv's own rule; the others get no
    file and `ringkv check` reports them not applicable): the engine's outputs, or "unsupported" with
    the reason where the engine cannot run the case. Prints one line per case on stderr."""
    import re
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("golden", help="a golden set: a folder with manifest.json (golden/, or `ringkv golden generate --random`)")
    ap.add_argument("out", help="the outputs folder for `ringkv check --outputs`")
    ap.add_argument("--filter", default="", help="only cases whose name matches this regex")
    ap.add_argument("--bug", choices=sorted(bugs), help="plant a bug that ringkv check must catch: " +
                    "; ".join(f"{k}: {v}" for k, v in sorted(bugs.items())))
    ap.add_argument("--ringkv", help="the ringkv binary: only the cases `ringkv golden list --capabilities` puts within "
                    "capabilities.json get an outputs file (the others are not applicable); without it every case gets one")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    name = engine.name + (" [planted bug " + args.bug + "]" if args.bug else "")
    caps_file = write_capabilities(args.out, engine)
    within = cases_within(args.ringkv, args.golden, caps_file) if args.ringkv else None
    for entry in load_manifest(args.golden)["cases"]:
        if args.filter and not re.search(args.filter, entry["name"]):
            continue
        path = os.path.join(args.out, entry["name"] + ".safetensors")
        if within is not None and entry["name"] not in within:
            if os.path.exists(path):
                os.remove(path)
            print(f"{entry['name']}: not applicable (outside capabilities.json)", file=sys.stderr)
            continue
        # A format 2 entry says what it requires; an engine that does not declare it gets no file
        # (`ringkv check` reports the case not applicable, never failed).
        lacking = [c for c in entry.get("requires", {}).get("capabilities", []) if not engine.capabilities().get(c)]
        if lacking:
            if os.path.exists(path):
                os.remove(path)
            print(f"{entry['name']}: not applicable (requires {', '.join(lacking)}, spec "
                  f"{entry['requires'].get('spec', '?')})", file=sys.stderr)
            continue
        case = Case(*read_safetensors(os.path.join(args.golden, entry["file"])))
        why = engine.unsupported(case)
        if why:
            write_outputs(path, case, name, unsupported=why)
            print(f"{case.name}: unsupported ({why})", file=sys.stderr)
            continue
        start = time.time()
        tensors = engine.run(case, args.bug)
        refused = tensors.pop("refused_steps", None)  # an engine with rollback returns the steps it refused
        write_outputs(path, case, name, engine.profile(case), tensors, refused_steps=refused)
        print(f"{case.name}: ran in {time.time() - start:.2f} s", file=sys.stderr)
