"""The package itself: its version is the project's, and under ctest it is the pip-installed wheel."""
import os
import re

import ringkv

HERE = os.path.dirname(os.path.abspath(__file__))


def test_version_is_the_projects():
    cmake = open(os.path.join(HERE, "..", "..", "CMakeLists.txt")).read()
    project = re.search(r"project\(ringkv VERSION ([0-9.]+)", cmake).group(1)
    pyproject = re.search(r'^version = "([0-9.]+)"', open(os.path.join(HERE, "..", "pyproject.toml")).read(), re.M)
    assert ringkv.__version__ == pyproject.group(1) == project


def test_the_tests_run_the_installed_package():
    """ctest sets RINGKV_EXPECT_INSTALLED=1: the package must come from the wheel pip installed, never python/src."""
    if os.environ.get("RINGKV_EXPECT_INSTALLED") == "1":
        src = os.path.abspath(os.path.join(HERE, "..", "src"))
        assert not os.path.abspath(ringkv.__file__).startswith(src + os.sep), ringkv.__file__
