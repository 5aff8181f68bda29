"""A reserve-only golden case (golden-format §12): format 2 because a layer has a rollback_reserve > 0,
but with no rollback in its schedule, so the C++ writer gives it an empty 'rollbacks' tensor ([0][4])
and a 'refused' tensor of zeros. The reader must take it as a format 2 case without events, with the
reserve in the ring capacity, and the numpy engine must pass it."""
import json

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

import ringkv
from ringkv import GoldenError
from ringkv.examples.numpy_engine import make_engine

# `ringkv golden generate --random 26 --seed 5` within the numpy engine's capabilities: case 25 is drawn
# as the Rollback property draws (i mod 13 == 12), and this one has a reserve but no rollback.
# name: (rollback_reserve per layer, capacity per layer = min(S + W + Q, max_tokens))
RESERVE_ONLY = {"random_5_25": ([5, 0], [13, 40])}  # layers W6 S2 Q5 and W40 S0, max_tokens 40


def raw(path):
    """The metadata and tensors of a case file as written, without the reader under test."""
    with safe_open(path, framework="numpy") as f:
        return dict(f.metadata()), {k: f.get_tensor(k) for k in f.keys()}


@pytest.fixture(scope="module")
def random_set(tmp_path_factory):
    """(manifest, outputs folder with the numpy engine's capabilities.json) of the random set."""
    out = tmp_path_factory.mktemp("reserve-only")
    engine = make_engine()
    caps = ringkv.write_capabilities(str(out / "outputs"), engine.name, engine.capabilities())
    return ringkv.read_manifest(ringkv.generate_random(str(out / "set"), 26, 5, caps)), str(out / "outputs")


@pytest.fixture(scope="module")
def reserve_only(random_set):
    """The set's reserve-only entries, picked from each file's own case JSON (not through the reader)."""
    manifest, _ = random_set
    found = []
    for entry in manifest:
        meta, _ = raw(entry.file)
        case = json.loads(meta["case"])
        if any(layer.get("rollback_reserve", 0) > 0 for layer in case["config"]["layers"]) and \
                not any(step.get("rollbacks") for step in case["steps"]):
            found.append(entry)
    assert sorted(e.name for e in found) == sorted(RESERVE_ONLY), "the random generators changed: pick another seed"
    return found


def test_the_writer_gives_a_reserve_only_case_an_empty_rollbacks_tensor(reserve_only):
    for entry in reserve_only:
        meta, t = raw(entry.file)
        assert meta["golden_format_version"] == "2" and meta["spec_version"] == "1.1"
        assert t["rollbacks"].dtype == np.int64 and t["rollbacks"].shape == (0, 4)
        assert t["refused"].dtype == np.int32 and t["refused"].shape == t["schedule"][:, 0].shape
        assert not t["refused"].any()
        assert entry.requires == {"spec": "1.1", "golden_format_version": 2, "capabilities": ["rollback"]}


def test_a_reserve_only_case_reads_as_format_2_without_events(random_set, reserve_only):
    manifest, _ = random_set
    for entry in reserve_only:
        ringkv.read_case(entry.file)  # (a) no error, from the file alone,
        case = manifest.load(entry)   # nor through its manifest (size, sha256, requires)
        meta, t = raw(entry.file)
        cfg = json.loads(meta["case"])["config"]
        # (b) the version
        assert case.format_version == 2 and entry.format_version == 2 and case.requires_rollback
        # (c) no events: no step rolls back or is refused, and every step of the case JSON is there
        assert len(case.steps) == len(json.loads(meta["case"])["steps"]) == t["schedule"].shape[0]
        assert [s.rollbacks for s in case.steps] == [[]] * len(case.steps)
        assert [s.refused for s in case.steps] == [False] * len(case.steps)
        # (d) the reserve and the ring capacity min(S + W + Q, max_tokens), per layer
        reserves, capacities = RESERVE_ONLY[entry.name]
        assert [layer.get("rollback_reserve", 0) for layer in case.layers] == reserves == \
            [layer.get("rollback_reserve", 0) for layer in cfg["layers"]]
        assert [case.capacity(l) for l in range(case.L)] == capacities == \
            [min(x["sinks"] + x["window"] + x.get("rollback_reserve", 0), cfg["max_tokens"]) for x in cfg["layers"]]
        # the schedule as for every committed case: chunks cover the rows in order, positions after resets
        assert [r for s in case.steps for c in s.chunks for r in range(c.b, c.b + c.n)] == list(range(case.R))
        held, p0 = [0] * case.B, list(case.start_positions)
        for step in case.steps:
            assert [int(n) for n in t["schedule"][step.number]] == \
                [sum(c.n for c in step.chunks if c.seq == s) for s in range(case.B)]
            for seq, start in step.resets:
                held[seq], p0[seq] = 0, start
            for c in step.chunks:
                assert (c.index, c.position) == (held[c.seq], p0[c.seq] + held[c.seq]), f"{case.name} {c}"
                np.testing.assert_array_equal(c.positions, c.position + np.arange(c.n))
                held[c.seq] += c.n
        assert any(step.resets for step in case.steps)  # (this one resets: the positions check has teeth)


def test_the_numpy_engine_passes_a_reserve_only_case(random_set, reserve_only, ringkv_cli):
    """(e) Replayed through ringkv.replay and judged by `ringkv check`: it passes, refusing nothing."""
    manifest, outputs = random_set
    for entry in reserve_only:
        result = ringkv.replay(manifest.load(entry), make_engine(), outputs)
        assert result.refused_steps == [] and result.unsupported is None
    report = ringkv.check(outputs, manifest.dir, filter="^(" + "|".join(e.name for e in reserve_only) + ") ")
    assert report["exit_code"] == 0 and report["passed"], report["output"]
    assert sorted((c["name"], c["status"]) for c in report["cases"]) == sorted((e.name, "passed") for e in reserve_only)


def test_the_capacity_of_a_reserve_only_case_is_capped_at_max_tokens(tmp_path, reserve_only):
    """The writer's reserve-only case, its sliding layer's reserve raised past max_tokens - S - W."""
    meta, t = raw(reserve_only[0].file)
    case = json.loads(meta["case"])
    layer, max_tokens = case["config"]["layers"][0], case["config"]["max_tokens"]
    layer["rollback_reserve"] = max_tokens  # S + W + Q > max_tokens
    path = str(tmp_path / "capped.safetensors")
    save_file(t, path, metadata=dict(meta, case=json.dumps(case)))
    read = ringkv.read_case(path)
    assert read.layers[0]["rollback_reserve"] == max_tokens and read.capacity(0) == max_tokens
    assert read.is_sliding(0) and [s.rollbacks for s in read.steps] == [[]] * len(read.steps)


@pytest.mark.parametrize("tensor", ["rollbacks", "refused"])
def test_a_reserve_only_case_without_its_rollbacks_or_refused_tensor_is_refused(tmp_path, reserve_only, tensor):
    """Format 2 always holds 'rollbacks' (even empty) and 'refused' (all 0 where nothing is refused), as the
    C++ reader requires: a file without either is corrupt, not a case without rollbacks."""
    meta, t = raw(reserve_only[0].file)
    del t[tensor]
    path = str(tmp_path / f"no-{tensor}.safetensors")
    save_file(t, path, metadata=meta)
    with pytest.raises(GoldenError) as e:
        ringkv.read_case(path)
    assert str(e.value).startswith(f"{path}: golden_format_version 2 without a '{tensor}' tensor"), str(e.value)
