"""The pytest plugin, run as a user runs it (pytest in a subprocess, the plugin from the entry point)."""
import os
import re
import subprocess
import sys

import ringkv

ENGINES = '''
import ringkv
from ringkv.examples.numpy_engine import NumpyEngine

class F16Less(NumpyEngine):
    def capabilities(self):
        return dict(super().capabilities(), k_dtypes=["f32", "bf16"], v_dtypes=["f32", "bf16"])
    def unsupported(self, case):
        return "bf16 is not built in this engine" if case.k_dtype == "bf16" else None

def make_f16_less():
    return F16Less()
'''


def run(pytester, golden_dir, *args):
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(my_engines=ENGINES)
    # --opt=value: a bare path after an option would count towards pytest's rootdir
    return pytester.runpytest_subprocess(f"--ringkv-golden={golden_dir}", f"--ringkv={ringkv.find_ringkv()}",
                                         "-p", "no:cacheprovider", "-rfs", *args)


def test_the_numpy_engine_passes_one_test_per_case(pytester, golden_dir, manifest):
    result = run(pytester, golden_dir, "--ringkv-engine=ringkv.examples.numpy_engine:make_engine", "-v")
    result.assert_outcomes(passed=len(manifest))
    result.stdout.fnmatch_lines([f"*collected {len(manifest)} items*", "ringkv-golden::decode_w8 PASSED*"])


def test_the_window_plus_one_engine_fails_with_classes_and_reproduce(pytester, golden_dir):
    result = run(pytester, golden_dir, "--ringkv-engine=ringkv.examples.numpy_engine:make_window_plus_one",
                 "-k", "decode_w8 or window_ge_length")
    result.assert_outcomes(passed=1, failed=2)  # decode_w8, decode_w8_sinks2 fail; W >= length cannot
    out = result.stdout.str()
    assert re.search(r"FAILED ringkv-golden::decode_w8 - Failed: ringkv check: case decode_w8 failed", out)
    assert "boundary classes: gqa needle-W+1 needle-W-1" in out
    assert "reproduce: ringkv check --outputs" in out and "--filter '^decode_w8 '" in out
    assert "worst error:" in out and "x the bound" in out


def test_random_cases_and_skips_with_reasons(pytester, golden_dir):
    result = run(pytester, golden_dir, "--ringkv-engine=my_engines:make_f16_less", "--ringkv-random=4",
                 "--ringkv-seed=3", "--ringkv-filter=^(kv_f16|core_d128_bf16_mqa_ring|decode_w8|random_3_.*)$", "-v")
    out = result.stdout.str()
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes["passed"] + outcomes["skipped"] == 7, out
    assert re.search(r"ringkv-golden::decode_w8 PASSED", out)
    for i in range(4):  # random cases within the capabilities: pass, or (bf16) say why not
        assert re.search(rf"ringkv-random::random_3_{i} (PASSED|SKIPPED \(unsupported: bf16)", out), out
    assert re.search(r"SKIPPED \[\d+\] .*: not applicable: .*f16", out)
    assert re.search(r"SKIPPED \[\d+\] .*: unsupported: bf16 is not built in this engine", out)


def test_scale_cases_at_serving_shapes(pytester, golden_dir):
    result = run(pytester, golden_dir, "--ringkv-engine=ringkv.examples.numpy_engine:make_engine", "--ringkv-scale=ci",
                 "--ringkv-filter=^scale_ci_gqa32x8_d256", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["ringkv-scale::scale_ci_gqa32x8_d256_b8_fp8_softcap PASSED*"])


def test_usage_errors_are_clear(pytester, golden_dir, tmp_path):
    result = run(pytester, golden_dir, "--ringkv-engine=my_engines:nothing")
    result.stderr.fnmatch_lines(["*--ringkv-engine my_engines:nothing: my_engines has no callable nothing*"])
    assert result.ret != 0
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest_subprocess("--ringkv-engine=ringkv.examples.numpy_engine:make_engine",
                                           f"--ringkv={tmp_path}/missing")
    result.stderr.fnmatch_lines(["*ringkv: the ringkv CLI */missing (from the argument) is not an executable file*"])
    assert result.ret != 0


def test_without_the_option_the_plugin_adds_nothing(pytester):
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "ringkv" in result.stdout.str()  # the plugin is loaded (from the installed entry point) ...
    assert "ringkv-golden" not in result.stdout.str()  # ... and silent


def test_the_readmes_command_as_written_in_a_folder_holding_only_the_engine(tmp_path, golden_dir, manifest, ringkv_cli):
    """README.md and python/README.md: bare `pytest --ringkv-engine=my_engine:make_engine` (the console script,
    which, unlike `python -m pytest`, does not put the current folder on sys.path) in a folder that holds
    only my_engine.py, with the installed package (PYTHONPATH: the folder the wheel was installed into)
    and the CLI on PATH, as the README's `PATH=/opt/ringkv/bin:$PATH pytest ...` has it."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "my_engine.py").write_text("from ringkv.examples.numpy_engine import NumpyEngine\n\n\n"
                                       "def make_engine():\n    return NumpyEngine()\n")
    pytest_script = os.path.join(os.path.dirname(sys.executable), "pytest")
    assert os.access(pytest_script, os.X_OK), f"no pytest console script next to {sys.executable}"
    site = os.path.dirname(os.path.dirname(os.path.abspath(ringkv.__file__)))
    env = {k: v for k, v in os.environ.items() if k not in ("RINGKV", "PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    env.update(PYTHONPATH=site, PATH=os.path.dirname(os.path.abspath(ringkv_cli)) + os.pathsep + env.get("PATH", ""))
    proc = subprocess.run([pytest_script, "--ringkv-engine=my_engine:make_engine", f"--ringkv-golden={golden_dir}"],
                          cwd=user, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert "cannot import" not in out, out
    assert proc.returncode == 0, out
    assert re.search(rf"\b{len(manifest)} passed\b", out), out


def test_an_engine_module_found_nowhere_names_where_it_was_looked_for(pytester, golden_dir):
    result = run(pytester, golden_dir, "--ringkv-engine=no_such_engine_module:make_engine")
    result.stderr.fnmatch_lines(["*cannot import no_such_engine_module: No module named 'no_such_engine_module'"
                                 " (searched sys.path*)"])
    assert result.ret != 0
