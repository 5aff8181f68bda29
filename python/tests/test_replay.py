"""replay() and check(): the numpy engine passes every committed case, its planted W+1 window fails on
the window's boundary classes, and protocol mistakes are named."""
import json
import os

import numpy as np
import pytest
from safetensors import safe_open

import ringkv
from ringkv.examples.numpy_engine import NumpyEngine, make_engine, make_window_plus_one


def replay_all(manifest, engine, out_dir, names=None):
    ringkv.write_capabilities(str(out_dir), engine.name, engine.capabilities())
    for entry in manifest:
        if names is None or entry.name in names:
            ringkv.replay(manifest.load(entry), engine, str(out_dir))
    return str(out_dir)


def test_numpy_engine_passes_every_committed_case(tmp_path, manifest, golden_dir, ringkv_cli):
    report = ringkv.check(replay_all(manifest, make_engine(), tmp_path), golden_dir)
    assert report["exit_code"] == 0 and report["passed"], report["output"]
    assert sorted(c["name"] for c in report["cases"]) == sorted(e.name for e in manifest)
    assert {c["status"] for c in report["cases"]} == {"passed"}
    # its rotated q/k were judged on their own (golden-format §7), and conformant
    assert {c["rope"]["verdict"] for c in report["cases"] if "rope" in c} == {"conformant"}


def test_window_plus_one_fails_on_the_window_classes(tmp_path, manifest, golden_dir, ringkv_cli):
    report = ringkv.check(replay_all(manifest, make_window_plus_one(), tmp_path), golden_dir)
    assert report["exit_code"] == 1 and not report["passed"]
    failed = [c for c in report["cases"] if c["status"] == "failed"]
    classes = {k for c in failed for k in c["classes"]}
    assert {"needle-W+1", "t=W+1", "t=W"} <= classes
    outcome, message = ringkv.verdict_of(next(c for c in failed if c["name"] == "decode_w8"))
    assert outcome == "failed"
    for part in ("case decode_w8 failed", "worst error:", "x the bound", "boundary classes: ", "needle-W+1",
                 "reproduce: ringkv check --outputs"):
        assert part in message


def test_capabilities_make_cases_not_applicable_and_unsupported_is_skipped(tmp_path, manifest, golden_dir, ringkv_cli):
    class F32Only(NumpyEngine):
        def capabilities(self):
            return dict(super().capabilities(), k_dtypes=["f32"], v_dtypes=["f32"])

        def unsupported(self, case):
            return "no multi-layer cases here" if case.L > 1 else None

    engine = F32Only()
    caps = ringkv.write_capabilities(str(tmp_path), engine.name, engine.capabilities())
    within = ringkv.cases_within(caps, golden_dir)
    assert "decode_w8" in within and "kv_f16" not in within
    replay_all(manifest, engine, tmp_path, within)
    report = ringkv.check(str(tmp_path), golden_dir)
    verdicts = {c["name"]: ringkv.verdict_of(c) for c in report["cases"]}
    assert verdicts["decode_w8"] == ("passed", "")
    assert verdicts["kv_f16"][0] == "not applicable" and "f16" in verdicts["kv_f16"][1]
    multi = [n for n, v in verdicts.items() if v[0] == "unsupported"]
    assert multi and all(verdicts[n][1] == "unsupported: no multi-layer cases here" for n in multi)
    assert all(v[0] != "failed" for v in verdicts.values())


def test_refusals_are_written_and_a_wrong_one_fails(tmp_path, manifest, golden_dir, ringkv_cli):
    entry = next(e for e in manifest if "rollback-refused" in e.classes)
    case = manifest.load(entry)
    spec_refused = [s.number for s in case.steps if s.refused]
    result = ringkv.replay(case, make_engine(), str(tmp_path / "good"))
    assert result.refused_steps == spec_refused
    with safe_open(result.path, framework="numpy") as f:
        assert json.loads(f.metadata()["refused_steps"]) == spec_refused

    class NeverRefuses(NumpyEngine):
        def rollback(self, rollbacks):
            try:
                super().rollback(rollbacks)
            except ringkv.Refused:
                for seq, n in rollbacks:  # a linear cache could: but the spec refuses it (§5.1.2)
                    self.held[seq] -= n
    ringkv.replay(case, NeverRefuses(), str(tmp_path / "bad"))
    report = ringkv.check(str(tmp_path / "bad"), golden_dir, filter=f"^{case.name} ")
    (c,) = report["cases"]
    assert c["status"] == "failed" and "refuse" in c["detail"]


def test_protocol_mistakes_are_named(tmp_path, manifest):
    case = manifest.load("decode_w8")

    class WrongShape(NumpyEngine):
        def append(self, chunks):
            return [np.zeros((1, 1, 1, 1), np.float32) for _ in chunks]
    with pytest.raises(ringkv.EngineError, match=r"case decode_w8 step 0 sequence 0: out has shape \[1, 1, 1, 1\], "
                                                 r"expected \[1, 1, 4, 32\]"):
        ringkv.replay(case, WrongShape(), str(tmp_path))

    class Extra(NumpyEngine):
        def append(self, chunks):
            return [dict(r, attention=1) for r in super().append(chunks)]
    with pytest.raises(ringkv.EngineError, match="result 'attention' is not an outputs tensor"):
        ringkv.replay(case, Extra(), str(tmp_path))

    class NoRollback(NumpyEngine):
        rollback = None
    rollback_case = manifest.load(next(e for e in manifest if e.format_version == 2))
    with pytest.raises(ringkv.EngineError, match="has rollbacks, but the engine has no rollback"):
        ringkv.run_case(rollback_case, NoRollback())


def test_check_without_a_cli_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("RINGKV", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ringkv.CheckError, match="the ringkv CLI was not found: pass ringkv=PATH"):
        ringkv.check(str(tmp_path))
    with pytest.raises(ringkv.CheckError, match="is not an executable file"):
        ringkv.check(str(tmp_path), ringkv=str(tmp_path / "nothing"))


def test_adapter_command_line(tmp_path, golden_dir, ringkv_cli):
    """ringkv.adapter.main, as engines/*/adapter.py use it: filtered cases, capabilities.json, a planted bug."""
    import subprocess
    import sys
    script = tmp_path / "adapter.py"
    script.write_text("from ringkv.adapter import main\nfrom ringkv.examples.numpy_engine import NumpyEngine\n"
                      "main(lambda bug: NumpyEngine(window_error=1 if bug else 0), 'an adapter', {'window+1': 'W + 1'})\n")
    cases = "decode_w8|rollback_batch_refused"
    for out, bug in (("good", []), ("bad", ["--bug", "window+1"])):
        subprocess.run([sys.executable, str(script), golden_dir, str(tmp_path / out), "--ringkv", ringkv_cli,
                        "--filter", f"^({cases})$"] + bug, check=True, capture_output=True)
        assert sorted(os.listdir(tmp_path / out)) == ["capabilities.json", "decode_w8.safetensors",
                                                      "rollback_batch_refused.safetensors"]
    good = ringkv.check(str(tmp_path / "good"), golden_dir, filter=f"^({cases}) ")
    assert good["passed"] and [c["status"] for c in good["cases"]] == ["passed", "passed"]
    bad = ringkv.check(str(tmp_path / "bad"), golden_dir, filter=f"^({cases}) ")
    assert not bad["passed"] and "failed" in [c["status"] for c in bad["cases"]]
    assert "[planted bug window+1]" in json.load(open(tmp_path / "bad" / "capabilities.json"))["name"]
