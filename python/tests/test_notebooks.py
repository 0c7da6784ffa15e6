"""The notebooks of docs/notebooks run top to bottom without an error (their asserts are part
of the check), executed with nbclient in a fresh kernel of this interpreter from the
notebook's own folder, and are committed without outputs (an output in the file would go stale
as soon as the program changes)."""
import pathlib

import nbclient
import nbformat
import pytest

from conftest import ROOT

NOTEBOOKS = sorted((ROOT / "docs" / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS, "docs/notebooks holds no notebook"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path: pathlib.Path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, (
                f"{path.name}: cell {i} holds outputs; commit the notebook stripped")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_runs_without_error(path: pathlib.Path):
    nb = nbformat.read(path, as_version=4)
    # Kernel "python3" is ipykernel's native spec, which runs this interpreter (the venv's),
    # whatever other kernels Jupyter may know of. 300 s a cell: the slowest takes about 20 s
    # on the 2-core CI machine.
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
