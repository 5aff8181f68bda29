"""Scale cases from files (docs/scale.md "Scale cases in files"): generate_scale() writes a scale case's
inputs, read_case() reads them without "expected", a Python engine replays them like a golden case and
check(..., scale=) judges its outputs on the sampled rows. The smallest ci case (845 rows): seconds."""
import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

import ringkv
from ringkv.examples.numpy_engine import make_engine

SHAPE = "gqa32x8_d256_b8_fp8_softcap"


@pytest.fixture(scope="module")
def scale_set(tmp_path_factory, ringkv_cli):
    out = str(tmp_path_factory.mktemp("scale") / "inputs")
    return ringkv.generate_scale(out, "ci", filter=SHAPE)


def replay_scale(scale_set, engine, out_dir):
    manifest = ringkv.read_manifest(scale_set)
    ringkv.write_capabilities(str(out_dir), engine.name, engine.capabilities())
    for entry in manifest:
        ringkv.replay(manifest.load(entry), engine, str(out_dir))
    return str(out_dir)


def test_a_scale_case_holds_the_inputs_and_no_expected_outputs(scale_set):
    manifest = ringkv.read_manifest(scale_set)
    assert [e.name for e in manifest] == ["scale_ci_" + SHAPE]
    case = manifest.load("scale_ci_" + SHAPE)
    assert case.scale_case == "scale/ci/" + SHAPE and case.meta["sample_every"] == "32"
    assert "expected" not in case.tensors and case.R == 845 and case.t["q"].shape == (1, 845, 32, 256)
    assert sum(c.n for s in case.steps for c in s.chunks) == case.R


def test_a_python_engine_is_judged_at_scale(tmp_path, scale_set, ringkv_cli):
    report = ringkv.check(replay_scale(scale_set, make_engine(), tmp_path / "ok"), scale="ci", filter=SHAPE)
    assert report["exit_code"] == 0 and report["passed"], report["output"]
    [case] = report["cases"]
    assert case["name"] == "scale/ci/" + SHAPE and case["status"] == "passed" and "sampled" in case["detail"]
    assert case["rope"]["verdict"] == "conformant"  # its q_rot/k_rot, judged apart

    # The same outputs 1 % off (the file edited, not replayed again: seconds saved).
    path = str(tmp_path / "ok" / f"scale_ci_{SHAPE}.safetensors")
    with safe_open(path, framework="numpy") as f:
        meta, tensors = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    save_file(dict(tensors, out=tensors["out"] * np.float32(1.01)), path, metadata=meta)
    report = ringkv.check(str(tmp_path / "ok"), scale="ci", filter=SHAPE)
    assert report["exit_code"] == 1 and not report["passed"]
    outcome, message = ringkv.verdict_of(report["cases"][0])
    assert outcome == "failed" and "step 0, sequence 0, token 0 " in message
    assert "ringkv golden generate --scale ci" in message and "--scale ci --no-golden" in message


def test_golden_dir_and_scale_exclude_each_other(tmp_path, scale_set, ringkv_cli):
    with pytest.raises(ringkv.CheckError, match="exclude each other"):
        ringkv.check(str(tmp_path), golden_dir=scale_set, scale="ci")
    with pytest.raises(ringkv.CheckError, match="is a set of scale cases"):
        ringkv.check(str(tmp_path), golden_dir=scale_set)
