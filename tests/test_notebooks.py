"""The notebooks: committed without outputs, and they run top to bottom on the demo memory."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_every_notebook_is_committed_clean() -> None:
    assert [p.name for p in NOTEBOOKS] == ["01_explore.ipynb", "02_tune_hnsw.ipynb",
                                           "03_report.ipynb", "04_hygiene.ipynb"]
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        first = notebook.cells[1]
        assert "parameters" in first.metadata.get("tags", []), path.name
        assert "HTM_DBURL" in first.source
        for cell in notebook.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(path: Path, demo: dict, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTM_DBURL", demo["url"])
    monkeypatch.setenv("MPLBACKEND", "Agg")
    notebook = nbformat.read(path, as_version=4)
    if path.stem == "02_tune_hnsw":  # fewer queries per measurement, as papermill would pass
        parameters = nbformat.v4.new_code_cell("QUERIES = 40", metadata={"tags": ["injected"]})
        notebook.cells.insert(2, parameters)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [output for cell in notebook.cells for output in cell.get("outputs", [])
              if output.get("output_type") == "error"]
    assert not errors
    printed = "".join(output.get("text", "") for cell in notebook.cells
                      for output in cell.get("outputs", []) if output.get("name") == "stdout")
    if path.stem == "01_explore":  # the summary beside the tag graph counts what it draws
        drawn = re.search(r"the plot: (\d+) tags in (\d+) communities", printed)
        assert drawn and int(drawn.group(1)) <= 30, printed
    if path.stem == "02_tune_hnsw":  # conclusions are computed and printed
        assert "ef_search=" in printed and "filtered to" in printed
        assert "recommended ef_search=" in printed and "usage statistics since" in printed
        assert not re.search(r"from \d+\.0 \(|\(1\.0x\)", printed), printed
    if path.stem == "04_hygiene":
        assert "memories checked" in printed and "clusters" in printed
    if path.stem == "03_report":
        assert (tmp_path / "report.html").stat().st_size > 100_000
