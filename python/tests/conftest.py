"""Fixtures of the ringkv package's tests: the committed golden set and the ringkv CLI.

RINGKV (the CLI) must be set or ringkv be on PATH: a test that needs it fails without it, it never
skips. RINGKV_GOLDEN overrides the golden set (default: the repository's golden/)."""
import os

import pytest

import ringkv

pytest_plugins = ["pytester"]
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture(scope="session")
def golden_dir():
    return os.environ.get("RINGKV_GOLDEN") or os.path.join(REPO, "golden")


@pytest.fixture(scope="session")
def manifest(golden_dir):
    return ringkv.read_manifest(golden_dir)


@pytest.fixture(scope="session")
def ringkv_cli():
    return ringkv.find_ringkv()  # raises CheckError with the instruction when there is none
