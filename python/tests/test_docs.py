"""docs/python.md's examples run as written: its ```python blocks in order, in one namespace,
from the repository root; its ```python gpu blocks after them where torch with CUDA, a
device and macattn's kernels are present."""
import os
import re

import pytest

from conftest import ROOT

DOC = ROOT / "docs" / "python.md"


def blocks(kind):
    text = DOC.read_text()
    return [(m.start(), m.group(2)) for m in re.finditer(r"```(python(?: gpu)?)\n(.*?)```", text,
                                                         re.S) if m.group(1) == kind]


def run(blocks_, tmp_cwd=None):
    ns = {"__name__": "docs_python_md"}
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        for pos, code in blocks_:
            line = DOC.read_text()[:pos].count("\n") + 1
            exec(compile(code, f"{DOC}:{line}", "exec"), ns)
    finally:
        os.chdir(cwd)
    return ns


def test_cpu_examples_run():
    cpu = blocks("python")
    assert len(cpu) >= 6
    run(cpu)


def test_gpu_examples_run():
    torch = pytest.importorskip("torch")
    import macattn
    if not (torch.cuda.is_available() and macattn.cuda.built_with_cuda()):
        pytest.skip("needs torch with CUDA, a device and macattn built with the kernels")
    gpu = blocks("python gpu")
    assert gpu
    run(blocks("python") + gpu)
