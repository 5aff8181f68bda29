"""Reading the committed golden set, and refusing broken or newer files with clear errors."""
import json
import os
import shutil

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

import ringkv
from ringkv import GoldenError


def test_every_committed_case_reads_into_a_consistent_schedule(manifest):
    assert len(manifest) > 0
    for entry in manifest:
        case = manifest.load(entry)
        t = case.tensors
        assert case.name == entry.name and case.classes == entry.classes
        assert case.config["batch"] == case.B and len(case.layers) == case.L
        assert (case.format_version == 2) == ("rollback" in entry.required_capabilities)
        rows = [r for step in case.steps for c in step.chunks for r in range(c.b, c.b + c.n)]
        assert rows == list(range(case.R)), f"{case.name}: chunks do not cover the rows in schedule order"
        for step in case.steps:
            assert [int(n) for n in t["schedule"][step.number]] == \
                [sum(c.n for c in step.chunks if c.seq == s) for s in range(case.B)]
            assert not step.refused or (step.rollbacks and not step.chunks and not step.resets)
            for c in step.chunks:
                assert c.q.shape == (case.L, c.n, case.Hq, case.D) and c.k.shape == (case.L, c.n, case.Hkv, case.D)
                np.testing.assert_array_equal(c.positions, c.position + np.arange(c.n))


def test_positions_follow_resets_and_rollbacks(manifest):
    """Replaying the schedule by hand (p0 + index since reset) gives each chunk's first index and position."""
    for entry in manifest:
        case = manifest.load(entry)
        held, p0 = [0] * case.B, list(case.start_positions)
        for step in case.steps:
            if step.refused:
                continue
            for seq, n in step.rollbacks:
                held[seq] -= n
            for seq, start in step.resets:
                held[seq], p0[seq] = 0, start
            for c in step.chunks:
                assert (c.index, c.position) == (held[c.seq], p0[c.seq] + held[c.seq]), f"{case.name} {c}"
                held[c.seq] += c.n


def rewrite(src, dst, meta=None, drop=(), tensors=None):
    """A copy of case file src at dst with metadata keys replaced and tensors dropped or replaced."""
    with safe_open(src, framework="numpy") as f:
        m = dict(f.metadata())
        t = {k: f.get_tensor(k) for k in f.keys() if k not in drop}
    m.update(meta or {})
    t.update(tensors or {})
    save_file(t, dst, metadata=m)
    return dst


@pytest.fixture
def decode_w8(manifest):
    return manifest.by_name["decode_w8"].file


@pytest.mark.parametrize("meta,drop,tensors,message", [
    ({"golden_format_version": "3"}, (), None, "golden_format_version 3: this ringkv reads versions 1 and 2"),
    ({"format": "something"}, (), None, "__metadata__ format is 'something'"),
    ({"case": "{not json"}, (), None, "__metadata__ case is not JSON"),
    (None, ("positions",), None, "tensor 'positions' is missing"),
    (None, (), {"q": np.zeros((1, 2, 3, 4), np.float32)}, "tensor 'q' is float32 [1, 2, 3, 4], expected float32 [1][33][4][32]"),
    (None, (), {"rows": np.zeros((33, 4), np.int32)}, "tensor 'rows' is int32"),
    ({"golden_format_version": "2"}, (), None, "golden_format_version 2 without a 'rollbacks' tensor"),
])
def test_a_broken_case_is_refused_naming_file_and_field(tmp_path, decode_w8, meta, drop, tensors, message):
    path = rewrite(decode_w8, str(tmp_path / "bad.safetensors"), meta, drop, tensors)
    with pytest.raises(GoldenError) as e:
        ringkv.read_case(path)
    assert path in str(e.value) and message in str(e.value)


def test_a_schedule_that_contradicts_its_rows_is_refused(tmp_path, decode_w8):
    with safe_open(decode_w8, framework="numpy") as f:
        chunks = f.get_tensor("chunks")
    chunks[3, 3] = 2  # 2 tokens where the schedule says 1
    path = rewrite(decode_w8, str(tmp_path / "bad.safetensors"), tensors={"chunks": chunks})
    with pytest.raises(GoldenError, match=r"chunks\[3\]: 2 tokens, but schedule\[3\]\[0\] says 1"):
        ringkv.read_case(path)


def test_a_truncated_file_is_refused(tmp_path, decode_w8):
    path = tmp_path / "cut.safetensors"
    path.write_bytes(open(decode_w8, "rb").read()[:1000])
    with pytest.raises(GoldenError, match="not a readable safetensors file"):
        ringkv.read_case(str(path))


def copy_set(golden_dir, dst, edit):
    os.makedirs(dst / "cases")
    m = json.load(open(os.path.join(golden_dir, "manifest.json")))
    entry = next(e for e in m["cases"] if e["name"] == "decode_w8")
    shutil.copy(os.path.join(golden_dir, entry["file"]), dst / entry["file"])
    m["cases"] = [entry]
    edit(m, entry)
    (dst / "manifest.json").write_text(json.dumps(m))
    return str(dst)


def test_manifest_errors_name_the_field(tmp_path, golden_dir):
    def newer(m, e):
        e["requires"] = {"golden_format_version": 3, "spec": "1.2"}
    with pytest.raises(GoldenError, match=r"cases\[0\].requires: case decode_w8 needs a newer ringkv"):
        ringkv.read_manifest(copy_set(golden_dir, tmp_path / "a", newer))

    def unknown(m, e):
        e["requires"] = {"paging": True}
    with pytest.raises(GoldenError, match=r"cases\[0\].requires: unknown field 'paging'"):
        ringkv.read_manifest(copy_set(golden_dir, tmp_path / "b", unknown))

    def manifest3(m, e):
        m["golden_format_version"] = "3"
    with pytest.raises(GoldenError, match="manifest.json: golden_format_version 3: this ringkv reads versions 1 and 2"):
        ringkv.read_manifest(copy_set(golden_dir, tmp_path / "c", manifest3))

    def changed(m, e):
        e["sha256"] = "0" * 64
    bad = ringkv.read_manifest(copy_set(golden_dir, tmp_path / "d", changed))
    with pytest.raises(GoldenError, match="sha256 differs from the manifest's"):
        bad.load("decode_w8")
    with pytest.raises(GoldenError, match="no golden set at"):
        ringkv.read_manifest(str(tmp_path / "nowhere"))


@pytest.mark.parametrize("where,value,message", [
    (("config",), "wndow", "case.config.wndow: unknown field; a case's config has config_version, layers, num_q_heads"),
    (("config", "layers", 0), "wndow",
     "case.config.layers[0].wndow: unknown field; a layer has window, sinks, rope, rollback_reserve"),
    (("config", "k_format"), "scales", "case.config.k_format.scales: unknown field; a K/V format has dtype, int8_scheme"),
    (("steps", 0), "paging", "case.steps[0].paging: unknown field; a step has resets, tokens, rollbacks"),
    ((), "colour", "case.colour: unknown field; a case has config, steps, initial_streams"),
])
def test_an_unknown_field_in_a_case_is_refused_naming_it(tmp_path, decode_w8, where, value, message):
    """A typo or a newer spec's field in a case's JSON is never ignored (issue 26; the C++ reader's rows
    config_unknown_field and layer_unknown_field of docs/reliability.md)."""
    with safe_open(decode_w8, framework="numpy") as f:
        case = json.loads(f.metadata()["case"])
    obj = case
    for key in where:
        obj = obj[key]
    obj[value] = 4
    path = rewrite(decode_w8, str(tmp_path / "bad.safetensors"), meta={"case": json.dumps(case)})
    with pytest.raises(GoldenError) as e:
        ringkv.read_case(path)
    assert str(e.value).startswith(f"{path}: {message}"), str(e.value)


@pytest.mark.parametrize("file", ["../../../../etc/passwd", "/etc/passwd", "cases/../../decode_w8.safetensors"])
def test_a_manifest_entry_outside_the_golden_folder_is_refused_before_it_is_opened(tmp_path, golden_dir, file):
    def outside(m, e):
        e["file"] = file
    folder = copy_set(golden_dir, tmp_path / "set", outside)
    with pytest.raises(GoldenError) as e:
        ringkv.read_manifest(folder)  # refused by the reader itself, before any case is loaded
    assert str(e.value) == (f"{folder}/manifest.json: cases[0].file = {json.dumps(file)}: must be a path inside the "
                            "golden folder, relative to it (e.g. \"cases/decode_w8.safetensors\"); not opened")


def test_a_manifest_version_given_as_a_number_names_the_field_and_the_form(tmp_path, golden_dir):
    def number(m, e):
        m["golden_format_version"] = 2
    folder = copy_set(golden_dir, tmp_path / "set", number)
    with pytest.raises(GoldenError) as e:
        ringkv.read_manifest(folder)
    assert str(e.value) == (f"{folder}/manifest.json: golden_format_version = 2: must be a string, \"1\" or \"2\" "
                            "(a version is written as a JSON string)")


def test_declared_repeats_read_and_hold_equal_data(manifest):
    """Spec 1.2 (golden-format §3.1): the serving cases declare repeats; each is the same position and
    bitwise-equal q, k and v, and every other case declares none (all -1)."""
    declaring = 0
    for entry in manifest:
        case = manifest.load(entry)
        assert case.repeat_of.shape == (case.R,)
        if "repeats" not in case.meta:
            assert (case.repeat_of == -1).all(), case.name
            continue
        declaring += 1
        for r in np.flatnonzero(case.repeat_of >= 0):
            j = case.repeat_of[r]
            assert j < r and case.repeat_of[j] == -1
            assert case.t["positions"][j] == case.t["positions"][r]
            for name in ("q", "k", "v"):
                assert case.t[name][:, j].tobytes() == case.t[name][:, r].tobytes()
        chunks = [c for step in case.steps for c in step.chunks]
        assert np.concatenate([c.repeat_of for c in chunks]).tolist() == case.repeat_of.tolist()
    assert declaring >= 3


@pytest.mark.parametrize("edit,message", [
    (lambda t, m: t["k"].__setitem__((0, 13, 0, 5), 0.4375),
     "__metadata__ repeats: row 13 repeats row 0, but tensor 'k' differs"),
    (lambda t, m: m.__setitem__("repeats", "[[14,0,1]]"),
     "row 14 repeats row 0, but tensor 'positions' holds 1 and 0: a repeat has the same position"),
    (lambda t, m: m.__setitem__("repeats", "[[13,20,1]]"), "repeats[0] = [13, 20, 1]: of must lie in [0, row = 13)"),
    (lambda t, m: m.__setitem__("repeats", "[[13,0]]"), "every run is [row, of, n], three integers"),
    (lambda t, m: m.__setitem__("repeats", "[[13"), "__metadata__ repeats is not JSON"),
])
def test_a_declared_repeat_the_data_contradict_is_a_corrupt_golden(tmp_path, manifest, edit, message):
    src = manifest.by_name["serving_prefixes_f32_w8_d32"].file
    with safe_open(src, framework="numpy") as f:
        m = dict(f.metadata())
        t = {k: f.get_tensor(k) for k in f.keys()}
    edit(t, m)
    path = str(tmp_path / "bad.safetensors")
    save_file(t, path, metadata=m)
    with pytest.raises(GoldenError) as e:
        ringkv.read_case(path)
    assert path in str(e.value) and message in str(e.value)
    assert "is not JSON" in message or "a corrupt golden: the file, not the engine" in str(e.value)
