"""Reading a ringkv golden set (docs/golden-format.md) into plain objects.

    manifest = read_manifest("golden")            # manifest.json: the cases, their classes and files
    case = manifest.load("decode_w8")             # size and sha256 checked against the manifest
    case = read_case("golden/cases/decode_w8.safetensors")   # or one file on its own
    case.config                                   # the config JSON (golden-format §2: layers, num_q_heads, ...)
    for step in case.steps:                       # the schedule (§3, §12)
        step.rollbacks                            # [(sequence, n_tokens)]: first (format 2)
        step.resets                               # [(sequence, p0)]: then
        step.chunks                               # [Chunk]: then the appends, one per sequence
        step.refused                              # format 2: the spec refuses this step (§12)
    chunk.q, chunk.k, chunk.v                     # [L][n][H][D] f32: the chunk's raw inputs (a slice)
    case.tensors                                  # every tensor of the file (numpy arrays)
    case.scale_case                               # a scale case ("scale/ci/<shape>"): inputs only, no "expected"
    case.repeat_of, chunk.repeat_of               # [R] / [n] int64: -1, or the earlier row this row repeats
                                                  # (spec 1.2, golden-format §3.1: same position, same q/k/v
                                                  # in every layer; all -1 when the file declares none)

Golden formats 1 and 2 are read; 3 and later are refused (`golden_format_version 3: this ringkv reads
versions 1 and 2`). Every check that fails raises GoldenError naming the file and the field.
"""
import hashlib
import json
import os

import numpy as np
from safetensors import safe_open

from .errors import GoldenError

FORMAT_VERSIONS = (1, 2)
REQUIRES_FIELDS = {"spec", "golden_format_version", "capabilities"}
# The fields of a case's JSON (golden-format §2; conformance/support/config_json.cpp reads the same): any
# other is refused, naming it, as the C++ reader does; a typo or a newer spec's field is never ignored.
CASE_FIELDS = ("config", "steps", "initial_streams", "seed", "data", "qk_amplitude", "layer_salt", "stream_salt",
               "needle_windows", "needle_sinks", "kv_head_repeat", "zero_rows_every")
CONFIG_FIELDS = ("config_version", "layers", "num_q_heads", "num_kv_heads", "head_dim", "batch", "max_tokens",
                 "softmax_scale", "softcap", "sink_logits", "k_format", "v_format", "start_positions")
LAYER_FIELDS = ("window", "sinks", "rope", "rollback_reserve")
ROPE_FIELDS = ("style", "theta", "rotary_dim", "scaling", "factor")
FORMAT_FIELDS = ("dtype", "int8_scheme", "rounding", "scale")
STEP_FIELDS = ("resets", "tokens", "rollbacks")
RESET_FIELDS = ("sequence", "start_position", "stream")
ROLLBACK_FIELDS = ("sequence", "n_tokens", "stream")
REQUIRES_CAPABILITIES = {"rollback"}
SPEC_VERSIONS = {"1", "1.1"}  # what a case may need; spec 1.2 adds no step semantics (its repeats: §3.1)


class Chunk:
    """The tokens one sequence appends in one step: rows b..b+n-1 of the case (golden-format §3)."""

    def __init__(self, case, step, seq, b, n):
        self.step, self.seq, self.b, self.n = step, seq, b, n
        self.rows = slice(b, b + n)
        self.index = int(case.tensors["rows"][b][2])             # token index since the last reset
        self.positions = case.tensors["positions"][b:b + n]      # true positions p0 + index (RoPE)
        self.position = int(self.positions[0])
        self.q = case.tensors["q"][:, b:b + n]                   # [L][n][Hq][D], raw (not rotated)
        self.k = case.tensors["k"][:, b:b + n]                   # [L][n][Hkv][D], raw
        self.v = case.tensors["v"][:, b:b + n]                   # [L][n][Hkv][D]
        self.repeat_of = case.repeat_of[b:b + n]                 # spec 1.2: -1, or the earlier row each repeats

    def __repr__(self):
        return f"Chunk(step={self.step}, seq={self.seq}, rows={self.b}..{self.b + self.n - 1}, index={self.index})"


class Step:
    """One step of the schedule: rollbacks (format 2), then resets, then one batch of chunks."""

    def __init__(self, number, rollbacks, resets, chunks, refused):
        self.number = number
        self.rollbacks = rollbacks  # [(sequence, n_tokens)]
        self.resets = resets        # [(sequence, p0)]
        self.chunks = chunks        # [Chunk], ascending sequence
        self.refused = refused      # spec 1.1 §5.1.2 refuses this step's rollbacks: it has no chunks

    def __repr__(self):
        return f"Step({self.number}, rollbacks={self.rollbacks}, resets={self.resets}, chunks={self.chunks})"


class Case:
    """One golden case: metadata, config, schedule and tensors (read_case)."""

    def __init__(self, path, meta, tensors):
        self.path, self.meta, self.tensors = path, meta, tensors
        self.t = tensors  # short alias
        self.name, self.id = meta["name"], meta["id"]
        self.format_version = _version(path, meta)
        # A scale case (`ringkv golden generate --scale`, docs/scale.md): the schedule and the inputs only,
        # no "expected" (ringkv check judges its outputs on sampled rows, regenerating the oracle).
        self.scale_case = meta.get("scale_case")
        self.spec_version = meta.get("spec_version", "1")
        self.classes = _json(path, meta, "classes", list)
        self.json = _json(path, meta, "case", dict)
        _check_fields(path, self.json)
        cfg = self.config = _field(path, self.json, "config", dict, "case")
        self.layers = _field(path, cfg, "layers", list, "case.config")
        for what in ("num_q_heads", "num_kv_heads", "head_dim", "batch", "max_tokens"):
            if _field(path, cfg, what, int, "case.config") < 1:
                raise GoldenError(f"{path}: case.config.{what} = {cfg[what]}: must be at least 1")
        for l, layer in enumerate(self.layers):
            where = f"case.config.layers[{l}]"
            if _field(path, layer, "window", int, where) < 1 or _field(path, layer, "sinks", int, where) < 0:
                raise GoldenError(f"{path}: {where}: window {layer['window']} must be >= 1, sinks {layer['sinks']} >= 0")
            _field(path, layer, "rope", dict, where)
        if not self.layers:
            raise GoldenError(f"{path}: case.config.layers is empty")
        self.L, self.Hq, self.Hkv, self.D = len(self.layers), cfg["num_q_heads"], cfg["num_kv_heads"], cfg["head_dim"]
        if self.Hq % self.Hkv:
            raise GoldenError(f"{path}: case.config.num_q_heads {self.Hq} is not a multiple of num_kv_heads {self.Hkv}")
        self.B, self.max_tokens = cfg["batch"], cfg["max_tokens"]
        self.scale = cfg.get("softmax_scale") or 1.0 / np.sqrt(self.D)
        self.softcap = cfg.get("softcap")
        self.sink_logits = cfg.get("sink_logits") or []  # [L][Hq] or []
        self.k_format = _field(path, cfg, "k_format", dict, "case.config")
        self.v_format = _field(path, cfg, "v_format", dict, "case.config")
        self.k_dtype, self.v_dtype = self.k_format.get("dtype"), self.v_format.get("dtype")
        self.start_positions = list(cfg.get("start_positions") or [0] * self.B)
        if len(self.start_positions) != self.B:
            raise GoldenError(f"{path}: case.config.start_positions has {len(self.start_positions)} entries, batch is {self.B}")
        self._check_tensors()
        self.R = tensors["rows"].shape[0]
        self.repeat_of = self._repeats()
        self.steps = self._schedule()

    @property
    def requires_rollback(self):
        return self.format_version >= 2

    def is_sliding(self, layer):
        """A layer's window slides when W < max_tokens (else it attends like full attention)."""
        return self.layers[layer]["window"] < self.max_tokens

    def capacity(self, layer):
        """The spec's ring capacity of a layer: min(S + W + rollback_reserve, max_tokens)."""
        lay = self.layers[layer]
        return min(lay["sinks"] + lay["window"] + lay.get("rollback_reserve", 0), self.max_tokens)

    def max_position(self):
        return int(self.tensors["positions"].max()) if self.R else 0

    def _check_tensors(self):
        t, path = self.tensors, self.path
        n_steps = len(_field(path, self.json, "steps", list, "case"))
        R = t["rows"].shape[0] if "rows" in t else None
        shapes = {"schedule": ("int32", (n_steps, self.B)), "chunks": ("int64", (None, 4)), "rows": ("int64", (R, 4)),
                  "positions": ("int64", (R,)), "q": ("float32", (self.L, R, self.Hq, self.D)),
                  "k": ("float32", (self.L, R, self.Hkv, self.D)), "v": ("float32", (self.L, R, self.Hkv, self.D)),
                  "expected": ("float32", (self.L, R, self.Hq, self.D))}
        optional = {"resets": ("int64", (None, 4)), "rollbacks": ("int64", (None, 4)), "refused": ("int32", (n_steps,))}
        if self.scale_case is not None:  # a scale case holds no expected outputs
            optional["expected"] = shapes.pop("expected")
        for name, (dtype, shape) in list(shapes.items()) + list(optional.items()):
            if name not in t:
                if name in shapes:
                    raise GoldenError(f"{path}: tensor '{name}' is missing")
                continue
            a = t[name]
            if a.dtype != np.dtype(dtype) or a.ndim != len(shape) or any(s is not None and s != g for s, g in zip(shape, a.shape)):
                want = "[" + "][".join("*" if s is None else str(s) for s in shape) + "]"
                raise GoldenError(f"{path}: tensor '{name}' is {a.dtype} {list(a.shape)}, expected {dtype} {want}")
        for name in ("rollbacks", "refused"):
            if self.format_version == 2 and name not in t:
                raise GoldenError(f"{path}: golden_format_version 2 without a '{name}' tensor (format 2 is for cases with rollbacks or a rollback reserve, and holds both, empty or all 0 where there are none)")
        if self.format_version == 1 and ("rollbacks" in t or "refused" in t):
            raise GoldenError(f"{path}: golden_format_version 1 with a 'rollbacks' or 'refused' tensor (those need format 2)")

    def _repeats(self):
        """Spec 1.2 (golden-format §3.1): __metadata__ repeats, runs [row, of, n], each repeat checked
        against the data (a wrong one is a corrupt golden, never the engine's fault); all -1 if absent."""
        rep = np.full(self.R, -1, np.int64)
        if "repeats" not in self.meta:
            return rep
        t, path, R = self.tensors, self.path, self.R
        runs = _json(path, self.meta, "repeats", list)
        blame = " (a corrupt golden: the file, not the engine)"
        end = 0
        for i, run in enumerate(runs):
            if not (isinstance(run, list) and len(run) == 3 and all(type(x) is int for x in run)):
                raise GoldenError(f"{path}: __metadata__ repeats[{i}] = {json.dumps(run)}: every run is [row, of, n], "
                                  f"three integers{blame}")
            row, of, n = run
            at = f"{path}: __metadata__ repeats[{i}] = {run}"
            if n < 1 or row < end or row > R - n:
                raise GoldenError(f"{at}: rows [row, row + n) must lie in [{end}, R = {R}), n >= 1, after the previous "
                                  f"run{blame}")
            if not 0 <= of < row:
                raise GoldenError(f"{at}: of must lie in [0, row = {row}): a repeat names an earlier row{blame}")
            rep[row:row + n] = np.arange(of, of + n)
            end = row + n
        for r in np.flatnonzero(rep >= 0).tolist():
            j = int(rep[r])
            at = f"{path}: __metadata__ repeats: row {r} repeats row {j}"
            if rep[j] != -1:
                raise GoldenError(f"{at}, itself a repeat of row {int(rep[j])}: name the first occurrence{blame}")
            if t["positions"][j] != t["positions"][r]:
                raise GoldenError(f"{at}, but tensor 'positions' holds {int(t['positions'][r])} and "
                                  f"{int(t['positions'][j])}: a repeat has the same position{blame}")
            for name in ("q", "k", "v"):
                if t[name][:, j].tobytes() != t[name][:, r].tobytes():
                    raise GoldenError(f"{at}, but tensor '{name}' differs: a repeat has bitwise-equal q, k and v in "
                                      f"every layer{blame}")
        return rep

    def _schedule(self):
        t, path = self.tensors, self.path
        n_steps, R = t["schedule"].shape[0], self.R
        none = np.zeros((0, 4), np.int64)
        refused = t["refused"] if "refused" in t else np.zeros(n_steps, np.int32)
        steps = [Step(s, [], [], [], bool(refused[s])) for s in range(n_steps)]

        def event(tensor, i, row):
            s, seq = int(row[0]), int(row[1])
            if not 0 <= s < n_steps or not 0 <= seq < self.B:
                raise GoldenError(f"{path}: {tensor}[{i}] = {row.tolist()}: step must be in [0, {n_steps}), "
                                  f"sequence in [0, {self.B})")
            return steps[s], seq

        for i, row in enumerate(t.get("rollbacks", none)):
            step, seq = event("rollbacks", i, row)
            step.rollbacks.append((seq, int(row[2])))
        for i, row in enumerate(t.get("resets", none)):
            step, seq = event("resets", i, row)
            step.resets.append((seq, int(row[2])))
        covered = 0
        for i, row in enumerate(t["chunks"]):
            step, seq = event("chunks", i, row)
            b, n = int(row[2]), int(row[3])
            if n < 1 or not 0 <= b or b + n > R:
                raise GoldenError(f"{path}: chunks[{i}] = {row.tolist()}: rows {b}..{b + n - 1} outside [0, {R})")
            if n != t["schedule"][step.number][seq]:
                raise GoldenError(f"{path}: chunks[{i}]: {n} tokens, but schedule[{step.number}][{seq}] says "
                                  f"{t['schedule'][step.number][seq]}")
            rows = t["rows"][b:b + n]
            if (rows[:, 0] != step.number).any() or (rows[:, 1] != seq).any() or \
                    (np.diff(rows[:, 2]) != 1).any() or rows[0, 2] < 0:
                raise GoldenError(f"{path}: rows {b}..{b + n - 1} are not chunks[{i}]'s tokens "
                                  f"(step {step.number}, sequence {seq}, consecutive indices)")
            step.chunks.append(Chunk(self, step.number, seq, b, n))
            covered += n
        if covered != R:
            raise GoldenError(f"{path}: the chunks cover {covered} rows of {R}")
        for step in steps:
            step.chunks.sort(key=lambda c: c.seq)
            if step.refused and (step.chunks or step.resets or not step.rollbacks):
                raise GoldenError(f"{path}: tensor 'refused': step {step.number} is refused, so it must hold "
                                  "rollbacks only (no resets, no appends)")
        return steps


class ManifestEntry:
    """One case of a manifest: name, id, classes, level, features, file (absolute), bytes, sha256, requires."""

    def __init__(self, golden_dir, i, e):
        where = f"{os.path.join(golden_dir, 'manifest.json')}: cases[{i}]"
        for key, kind in (("name", str), ("id", str), ("file", str), ("classes", list)):
            if not isinstance(e.get(key), kind):
                raise GoldenError(f"{where}.{key}: missing or not a {kind.__name__}")
        self.name, self.id, self.classes = e["name"], e["id"], e["classes"]
        self.level, self.features = e.get("level"), e.get("features", [])
        file = e["file"]  # checked before anything opens it: inside the golden folder, relative to it
        normal = os.path.normpath(file)
        if not file or os.path.isabs(file) or normal == os.pardir or normal.startswith(os.pardir + os.sep):
            raise GoldenError(f"{where}.file = {json.dumps(file)}: must be a path inside the golden folder, relative to "
                              f"it (e.g. \"cases/{self.name}.safetensors\"); not opened")
        self.file = os.path.join(golden_dir, file)
        self.bytes, self.sha256 = e.get("bytes"), e.get("sha256")
        self.requires = e.get("requires", {})
        unknown = set(self.requires) - REQUIRES_FIELDS
        if unknown:
            raise GoldenError(f"{where}.requires: unknown field {sorted(unknown)[0]!r} (known: {sorted(REQUIRES_FIELDS)})")
        caps = set(self.requires.get("capabilities", [])) - REQUIRES_CAPABILITIES
        if caps:
            raise GoldenError(f"{where}.requires.capabilities: unknown capability {sorted(caps)[0]!r} "
                              f"(known: {sorted(REQUIRES_CAPABILITIES)})")
        version = self.requires.get("golden_format_version", 1)
        if version not in FORMAT_VERSIONS or self.requires.get("spec", "1") not in SPEC_VERSIONS:
            raise GoldenError(f"{where}.requires: case {self.name} needs a newer ringkv (golden_format_version "
                              f"{version}, spec {self.requires.get('spec')}; this one reads versions 1 and 2, spec 1 and 1.1)")
        self.format_version = version

    @property
    def required_capabilities(self):
        return list(self.requires.get("capabilities", []))


class Manifest:
    """A golden set's manifest.json (golden-format §8): its entries, in file order."""

    def __init__(self, golden_dir):
        self.dir = os.path.abspath(golden_dir)
        path = os.path.join(self.dir, "manifest.json")
        if not os.path.isfile(path):
            raise GoldenError(f"no golden set at {golden_dir}: {path} does not exist")
        try:
            with open(path) as f:
                m = json.load(f)
        except (OSError, ValueError) as e:
            raise GoldenError(f"{path}: not a JSON file: {e}") from None
        if not isinstance(m, dict) or m.get("format") != "ringkv-golden-manifest":
            raise GoldenError(f"{path}: format must be \"ringkv-golden-manifest\"")
        text = m.get("golden_format_version", "1")
        if not isinstance(text, str):
            raise GoldenError(f"{path}: golden_format_version = {json.dumps(text)}: must be a string, \"1\" or \"2\" "
                              "(a version is written as a JSON string)")
        version = _int_version(path, text, "golden_format_version")
        if version not in FORMAT_VERSIONS:
            raise GoldenError(f"{path}: golden_format_version {version}: this ringkv reads versions 1 and 2")
        if not isinstance(m.get("cases"), list):
            raise GoldenError(f"{path}: cases: missing or not a list")
        self.format_version, self.spec_version = version, m.get("spec_version", "1")
        self.generator = m.get("generator")  # a random set: {"random": N, "seed": S, "capabilities": {...}}
        self.entries = [ManifestEntry(self.dir, i, e) for i, e in enumerate(m["cases"])]
        self.by_name = {e.name: e for e in self.entries}

    def __iter__(self):
        return iter(self.entries)

    def __len__(self):
        return len(self.entries)

    def load(self, entry, verify=True):
        """The case of an entry (or a name), its size and sha256 checked against the manifest first."""
        if isinstance(entry, str):
            if entry not in self.by_name:
                raise GoldenError(f"{self.dir}/manifest.json: no case named {entry!r}")
            entry = self.by_name[entry]
        if verify:
            try:
                with open(entry.file, "rb") as f:
                    data = f.read()
            except OSError as e:
                raise GoldenError(f"{entry.file}: cannot read the case {entry.name}: {e.strerror}") from None
            if entry.bytes is not None and len(data) != entry.bytes:
                raise GoldenError(f"{entry.file}: {len(data)} bytes, the manifest says {entry.bytes}")
            if entry.sha256 is not None and hashlib.sha256(data).hexdigest() != entry.sha256:
                raise GoldenError(f"{entry.file}: sha256 differs from the manifest's (a corrupt or changed file)")
        case = read_case(entry.file)
        if case.name != entry.name or case.id != entry.id:
            raise GoldenError(f"{entry.file}: name/id {case.name} differ from the manifest entry {entry.name}")
        if case.format_version != entry.format_version:
            raise GoldenError(f"{entry.file}: golden_format_version {case.format_version}, but its manifest entry "
                              f"requires {entry.format_version}")
        return case


def read_manifest(golden_dir):
    """The Manifest of a golden set folder (manifest.json and cases/)."""
    return Manifest(golden_dir)


def read_case(path):
    """One golden case file (safetensors) as a Case. Raises GoldenError naming the file and field."""
    if not os.path.isfile(path):
        raise GoldenError(f"{path}: no such golden case file")
    try:
        with safe_open(path, framework="numpy") as f:
            meta = f.metadata() or {}
            tensors = {name: f.get_tensor(name) for name in f.keys()}
    except Exception as e:  # safetensors raises its own SafetensorError and others on a corrupt file
        raise GoldenError(f"{path}: not a readable safetensors file: {e}") from None
    if meta.get("format") != "ringkv-golden":
        raise GoldenError(f"{path}: __metadata__ format is {meta.get('format')!r}, expected \"ringkv-golden\"")
    for key in ("name", "id", "case", "classes"):
        if key not in meta:
            raise GoldenError(f"{path}: __metadata__ {key} is missing")
    return Case(path, meta, tensors)


def _int_version(path, text, field):
    try:
        return int(text)
    except (TypeError, ValueError):
        raise GoldenError(f"{path}: {field} {text!r} is not a version number") from None


def _version(path, meta):
    v = _int_version(path, meta.get("golden_format_version", "1"), "golden_format_version")
    if v not in FORMAT_VERSIONS:
        raise GoldenError(f"{path}: golden_format_version {v}: this ringkv reads versions 1 and 2")
    return v


def _json(path, meta, key, kind):
    try:
        value = json.loads(meta[key])
    except ValueError as e:
        raise GoldenError(f"{path}: __metadata__ {key} is not JSON: {e}") from None
    if not isinstance(value, kind):
        raise GoldenError(f"{path}: __metadata__ {key} is not a JSON {kind.__name__}")
    return value


def _only(path, obj, where, known, what):
    """Refuses a field of obj outside known: "PATH: WHERE.FIELD: unknown field; WHAT has ..."."""
    if isinstance(obj, dict):
        for key in obj:
            if key not in known:
                raise GoldenError(f"{path}: {where}.{key}: unknown field; {what} has {', '.join(known)}")


def _check_fields(path, case):
    """Every object of a case's JSON holds only the fields its reader knows."""
    _only(path, case, "case", CASE_FIELDS, "a case")
    config = case.get("config")
    _only(path, config, "case.config", CONFIG_FIELDS, "a case's config")
    if not isinstance(config, dict):
        return
    for l, layer in enumerate(config.get("layers") or []):
        _only(path, layer, f"case.config.layers[{l}]", LAYER_FIELDS, "a layer")
        if isinstance(layer, dict):
            _only(path, layer.get("rope"), f"case.config.layers[{l}].rope", ROPE_FIELDS, "a layer's rope")
    for name in ("k_format", "v_format"):
        _only(path, config.get(name), f"case.config.{name}", FORMAT_FIELDS, "a K/V format")
    for i, step in enumerate(case.get("steps") or []):
        _only(path, step, f"case.steps[{i}]", STEP_FIELDS, "a step")
        if isinstance(step, dict):
            for r, reset in enumerate(step.get("resets") or []):
                _only(path, reset, f"case.steps[{i}].resets[{r}]", RESET_FIELDS, "a reset")
            for r, rollback in enumerate(step.get("rollbacks") or []):
                _only(path, rollback, f"case.steps[{i}].rollbacks[{r}]", ROLLBACK_FIELDS, "a rollback")


def _field(path, obj, key, kind, where):
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise GoldenError(f"{path}: {where}.{key}: missing or not a{'n' if kind is int else ''} {kind.__name__}")
    return value
