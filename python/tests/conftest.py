"""Shared fixtures of the macattn pytest suites: the golden files of data/golden and the
mac-sim binary of a CMake build, if one exists."""
import os
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN_TRACE = ROOT / "data" / "golden" / "synth_small.h5"
GOLDEN_RUN = ROOT / "data" / "golden" / "synth_small_run.h5"


def find_mac_sim():
    """mac-sim of the CMake build: $MAC_SIM, else build/bin or build-cpu/bin (scripts/test.sh
    builds build/ before it runs this suite), else on PATH."""
    cands = [os.environ.get("MAC_SIM"), ROOT / "build" / "bin" / "mac-sim",
             ROOT / "build-cpu" / "bin" / "mac-sim", shutil.which("mac-sim")]
    for c in cands:
        if c and os.access(str(c), os.X_OK):
            return str(c)
    return None


@pytest.fixture(scope="session")
def golden():
    import macattn
    trace = macattn.read_trace(GOLDEN_TRACE)
    return trace


@pytest.fixture(scope="session")
def golden_run():
    import macattn
    return macattn.read_run_dump(str(GOLDEN_RUN))


@pytest.fixture(scope="session")
def mac_sim():
    exe = find_mac_sim()
    if exe is None:
        pytest.skip("no mac-sim binary (build the CMake project, or set MAC_SIM)")
    return exe
