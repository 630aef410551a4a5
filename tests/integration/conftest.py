"""conftest.py — pytest hooks: report what is tested, skip everything when the binary is missing.
The helpers themselves live in helpers.py."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from helpers import BIN, DEVICES, MPIRUN_FLAGS  # noqa: E402


def pytest_report_header(config):
    return f"histeq_dist: {BIN}; devices: {' '.join(DEVICES)}; mpirun flags: {' '.join(MPIRUN_FLAGS)}"


def pytest_collection_modifyitems(config, items):
    # Run by hand before the binary exists: skip. Run by the Makefile (HQ_BIN set): a missing
    # binary is a failure, reported by the first test that runs it.
    if not os.access(BIN, os.X_OK) and not os.environ.get("HQ_BIN"):
        skip = pytest.mark.skip(reason=f"{BIN} is not built")
        for it in items:
            it.add_marker(skip)


@pytest.fixture
def tmp(tmp_path):
    """A fresh directory per test."""
    return tmp_path
