"""ringkv: conformance checks for sliding-window attention with a ring KV cache, from Python.

    import ringkv
    manifest = ringkv.read_manifest(golden_dir)            # the golden set (docs/golden-format.md)
    case = manifest.load("decode_w8")                      # config, schedule, inputs as plain objects
    ringkv.replay(case, engine, "outputs")                 # drives an engine step by step (ringkv.replay)
    report = ringkv.check("outputs", golden_dir)           # `ringkv check --outputs`, the parsed JSON report
    ringkv.generate_scale("scale", "ci")                   # scale cases' inputs; check("outputs", scale="ci")

and a pytest plugin: `pytest --ringkv-engine module:factory` (ringkv.pytest_plugin).
"""
from .check import cases_within, check, default_golden_dir, find_ringkv, generate_random, generate_scale, verdict_of
from .errors import CheckError, EngineError, GoldenError, Refused, RingkvError
from .golden import Case, Chunk, Manifest, Step, read_case, read_manifest
from .outputs import write_capabilities, write_outputs
from .replay import ReplayResult, replay, run_case

__version__ = "0.1.0"
__all__ = ["Case", "CheckError", "Chunk", "EngineError", "GoldenError", "Manifest", "Refused", "ReplayResult",
           "RingkvError", "Step", "cases_within", "check", "default_golden_dir", "find_ringkv", "generate_random",
           "generate_scale", "read_case", "read_manifest", "replay", "run_case", "verdict_of", "write_capabilities", "write_outputs"]
