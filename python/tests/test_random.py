"""--ringkv-random (issue 26): a random set carries rollback cases (spec 1.1) wherever the engine declares
rollback, without any option to ask for them, and the numpy example engine passes them."""
import ringkv
from ringkv.examples.numpy_engine import make_engine
from ringkv.outputs import write_capabilities
from ringkv.replay import capabilities_of


def test_random_sets_carry_rollback_cases_for_an_engine_that_declares_rollback(pytester, golden_dir, tmp_path):
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest_subprocess(f"--ringkv-golden={golden_dir}", f"--ringkv={ringkv.find_ringkv()}",
                                           "-p", "no:cacheprovider", "-rfs",
                                           "--ringkv-engine=ringkv.examples.numpy_engine:make_engine",
                                           "--ringkv-random=26", "--ringkv-seed=4", "--ringkv-filter=^random_4_", "-v")
    result.assert_outcomes(passed=26)
    result.stdout.fnmatch_lines(["*ringkv-random::random_4_12 PASSED*", "*ringkv-random::random_4_25 PASSED*"])
    # The set the plugin generated (the same seed and capabilities give the same set): 1 case in 13 is
    # the Rollback property's, with rollbacks in its schedule.
    caps = write_capabilities(str(tmp_path), "numpy", capabilities_of(make_engine()))
    rolling = [e.name for e in ringkv.read_manifest(ringkv.generate_random(str(tmp_path / "set"), 26, 4, caps))
               if "rollback" in e.required_capabilities]
    assert rolling == ["random_4_12", "random_4_25"]
