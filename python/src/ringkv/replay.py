"""Driving an engine through a golden case, step by step, and writing its outputs file.

    result = replay(case, engine, out_dir)        # writes out_dir/<case.name>.safetensors
    report = check(out_dir, golden_dir)           # ringkv check --outputs (ringkv.check)

The engine protocol: an object with

    name                              str: the engine's name and version (written into the outputs file)
    start(case)                       a new case begins (case.config, case.layers, ...): every sequence
                                      is empty and starts at case.start_positions[seq]
    reset(seq, p0)                    sequence `seq` drops its tokens; its next token is at position p0
    append(chunks) -> [result, ...]   one step's batch: chunks (ringkv.golden.Chunk: .seq, .index, .positions,
                                      .q [L][n][Hq][D], .k and .v [L][n][Hkv][D], raw, not rotated), one
                                      result per chunk, in order: the output "out" [L][n][Hq][D] as an
                                      array, or a dict of per-row tensors: "out" and, optionally,
                                      "q_rot"/"k_rot" (rotated q and k, both or neither) and the stored
                                      cache "k_stored"/"v_stored" (INT8: with "k_codes"/"v_codes" and,
                                      for per_head and q8_0, "k_scales"/"v_scales"), golden-format §7
and optionally
    capabilities() -> dict            golden-format §10 without "format"/"name" (default {}: every
                                      case of spec 1, no rollback); cases outside need not be replayed
    profile(case) -> dict             the precision profile it declares for this case (golden-format §5;
                                      default: capabilities()["profile"], else ringkv's default)
    unsupported(case) -> str | None   why it cannot run this case (then the outputs file says so)
    rollback(rollbacks)               spec 1.1: the step's rollbacks [(seq, n_tokens)], all or nothing;
                                      raise ringkv.Refused to refuse them (changing nothing); required
                                      by cases with rollbacks (capability "rollback")

Each step is replayed as rollbacks (if any), then resets, then one append of the step's chunks. A
refused step is listed in the outputs file's refused_steps; ringkv check judges whether the spec
refuses it too (golden-format §12).
"""
import os

import numpy as np

from .errors import EngineError, Refused
from .outputs import TENSORS, write_outputs

PER_Q_HEAD = ("out", "q_rot")


class ReplayResult:
    """What replay() did: the outputs file it wrote, the steps the engine refused, or the reason the
    engine gave for not running the case."""

    def __init__(self, path, tensors, refused_steps, unsupported):
        self.path, self.tensors, self.refused_steps, self.unsupported = path, tensors, refused_steps, unsupported


def capabilities_of(engine):
    """The engine's capabilities object (golden-format §10), {} when it declares none."""
    caps = engine.capabilities() if hasattr(engine, "capabilities") else {}
    if not isinstance(caps, dict):
        raise EngineError(f"{engine_name(engine)}: capabilities() returned {type(caps).__name__}, not a dict")
    return caps


def engine_name(engine):
    return str(getattr(engine, "name", type(engine).__name__))


def profile_of(engine, case):
    if hasattr(engine, "profile"):
        return engine.profile(case)
    return capabilities_of(engine).get("profile")


def run_case(case, engine):
    """Replays `case` through `engine`; returns (tensors {name: [L][R]... array}, refused steps)."""
    name = engine_name(engine)
    for method in ("start", "reset", "append"):
        if not callable(getattr(engine, method, None)):
            raise EngineError(f"{name}: the engine has no {method}() method (the protocol: ringkv.replay)")
    tensors, refused = {}, []
    engine.start(case)
    for step in case.steps:
        if step.rollbacks:
            if not callable(getattr(engine, "rollback", None)):
                raise EngineError(f"{name}: case {case.name} step {step.number} has rollbacks, but the engine has no "
                                  "rollback() method (declare capability \"rollback\" only with one)")
            try:
                engine.rollback(list(step.rollbacks))
            except Refused:
                refused.append(step.number)  # the whole step: nothing of it happens
                continue
        for seq, p0 in step.resets:
            engine.reset(seq, p0)
        if not step.chunks:
            continue
        results = engine.append(list(step.chunks))
        if results is None or len(results) != len(step.chunks):
            raise EngineError(f"{name}: case {case.name} step {step.number}: append() returned "
                              f"{'None' if results is None else len(results)} results for {len(step.chunks)} chunks")
        for chunk, result in zip(step.chunks, results):
            _store(case, name, chunk, result, tensors)
    return tensors, refused


def replay(case, engine, out_dir, path=None):
    """Runs `case` through `engine` and writes its outputs file (out_dir/<case.name>.safetensors, or
    `path`): the outputs, or "unsupported" with the engine's reason. Returns a ReplayResult."""
    path = path or os.path.join(out_dir, case.name + ".safetensors")
    name = engine_name(engine)
    why = engine.unsupported(case) if hasattr(engine, "unsupported") else None
    if why:
        write_outputs(path, case, name, unsupported=why)
        return ReplayResult(path, {}, [], why)
    tensors, refused = run_case(case, engine)
    write_outputs(path, case, name, profile_of(engine, case), tensors, refused_steps=refused)
    return ReplayResult(path, tensors, refused, None)


def _store(case, name, chunk, result, tensors):
    """Copies one chunk's result into the case-wide tensors (rows chunk.b..chunk.b+n-1)."""
    if not isinstance(result, dict):
        result = {"out": result}
    where = f"{name}: case {case.name} step {chunk.step} sequence {chunk.seq}"
    if "out" not in result:
        raise EngineError(f"{where}: the result has no \"out\"")
    for key, value in result.items():
        if key not in TENSORS:
            raise EngineError(f"{where}: result {key!r} is not an outputs tensor (golden-format §7: {', '.join(TENSORS)})")
        a = np.asarray(value)
        heads = case.Hq if key in PER_Q_HEAD else case.Hkv
        last = a.shape[3] if key.endswith("_scales") and a.ndim == 4 else case.D
        want = (case.L, chunk.n, heads, last)
        if a.shape != want:
            raise EngineError(f"{where}: {key} has shape {list(a.shape)}, expected {list(want)} ([L][n][H][D])")
        if key not in tensors:
            dtype = TENSORS[key]
            fill = np.nan if np.issubdtype(dtype, np.floating) else 0  # rows no chunk wrote can never pass
            tensors[key] = np.full((case.L, case.R) + want[2:], fill, dtype)
        tensors[key][:, chunk.rows] = a
