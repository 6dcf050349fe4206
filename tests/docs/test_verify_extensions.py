"""The docs extensions, on a two-cell page and a two-block gallery script.

As MyST-NB tests its own extension, these build a tiny Sphinx project for real:
myst-nb executes the page in a Jupyter kernel and sphinx-gallery runs the script,
then the warnings are read back, both builds checking as on another CPU
(``ATTENTION_OTHER_CPU``). One holds only correct expectations and must be silent;
the other plants the mistakes the checks exist for, and each must be reported at its
line.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from docutils import nodes, utils
from fill_expected import fill, fill_script
from jupyter_cache import get_cache
from printed_values import expected_output, printed_text, without_expectations
from verify_gallery import block_outputs, figure_alt
from verify_outputs import figure_problems, join_printed_chunks, prose_lines

EXTENSIONS = Path(__file__).resolve().parents[2] / "docs" / "_ext"

CONF = f"""
import sys
sys.path.insert(0, {str(EXTENSIONS)!r})
extensions = ["myst_nb", "page_runs", "sphinx_gallery.gen_gallery", "verify_outputs",
              "verify_gallery"]
exclude_patterns = ["_build", "auto_gallery/*.ipynb", "auto_gallery/*.py",
                    "auto_gallery/*.zip", "auto_gallery/*.md5", "auto_gallery/*.json"]
import os
# As the site: page_runs runs the page into myst-nb's cache, emptied first unless in
# reuse mode (ATTENTION_DOCS_CACHE).
nb_execution_mode = "cache"
nb_execution_cache_path = os.path.join(os.path.dirname(__file__), "_build", "jupyter_cache")
page_runs_reuse = bool(os.environ.get("ATTENTION_DOCS_CACHE"))
nb_execution_raise_on_error = False  # as the site: report, and go on
nb_merge_streams = False  # as the site: verify_outputs joins a cell's printed chunks
sphinx_gallery_conf = {{
    "examples_dirs": "../gallery", "gallery_dirs": "auto_gallery", "filename_pattern": ".*",
    "capture_repr": (), "image_scrapers": ("matplotlib",), "download_all_examples": False,
    "reset_modules": (),
}}
html_theme = "basic"
"""

INDEX = """\
# Demo

```{toctree}
page
auto_gallery/index
```
"""

PAGE = """\
---
file_format: mystnb
kernelspec:
  name: python3
  display_name: Python 3
---

# A page

```{code-cell} ipython3
import torch
torch.set_printoptions(precision=4, sci_mode=False)
```

The weights sum to 1.00; the largest is 0.4950.

```{code-cell} ipython3
---
expect: |
  tensor([0.4950, 0.5050])
  tensor([1., 1., 1.])
---
print(torch.tensor([0.4950, 0.5050]))
print(torch.ones(3))
```

```{code-cell} ipython3
---
expect: |
  printed in two chunks, on one line
---
import sys

print("printed in two chunks,", end="")
sys.stdout.flush()  # the kernel sends what it has so far
print(" on one line")
```
"""

SCRIPT = '''\
"""
A demo
======

The sum is 0.75.
"""

# %%
# Two numbers.

import torch

torch.set_printoptions(precision=4, sci_mode=False)
print(torch.tensor([0.25, 0.5]))
# Expected output:
# tensor([0.2500, 0.5000])
print(torch.ones(2))
# Expected output:
# tensor([1., 1.])

# %%
# Two figures; the thumbnail shows the second.

import matplotlib.pyplot as plt

for title in ("The first figure", "The second figure"):
    figure, axes = plt.subplots(figsize=(2, 2))
    figure.suptitle(title)
    axes.plot([0, 1])

# sphinx_gallery_thumbnail_number = 2

# %%
# Their sum.

print(torch.tensor(0.75))
# Expected output:
# tensor(0.7500)
'''


def make_project(top: Path, page: str = PAGE, script: str = SCRIPT) -> Path:
    """``top/docs`` (the Sphinx project) and ``top/gallery``, as in this repository."""
    root = top / "docs"
    root.mkdir()
    (top / "gallery").mkdir()
    (root / "conf.py").write_text(CONF)
    (root / "index.md").write_text(INDEX)
    (root / "page.md").write_text(page)
    (top / "gallery" / "README.rst").write_text("Gallery\n=======\n")
    (top / "gallery" / "plot_demo.py").write_text(script)
    return root


def build(root: Path, **extra: str) -> tuple[int, str]:
    """Build ``root`` checking as on another CPU, as ``nox -s docs-other-cpu`` does."""
    env = {**os.environ, "ATTENTION_OTHER_CPU": "1", **extra}
    warnings = root / "warnings.txt"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-q",
            "-n",
            "-E",
            "-b",
            "html",
            "-w",
            str(warnings),
            str(root),
            str(root / "_build" / "html"),
        ],
        env={**env, "PYDEVD_DISABLE_FILE_VALIDATION": "1", "MPLBACKEND": "Agg"},
        capture_output=True,
        text=True,
        check=False,
    )
    return result.returncode, warnings.read_text() if warnings.exists() else result.stderr


def warning_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "WARNING" in line]


@pytest.fixture(scope="module")
def good_build(tmp_path_factory):
    """The correct project, checked as on another CPU."""
    root = make_project(tmp_path_factory.mktemp("good"))
    return root, *build(root)


def test_correct_expectations_pass_with_another_cpus_last_digits(good_build):
    _, code, warnings = good_build
    assert code == 0, warnings
    assert warning_lines(warnings) == []


def test_the_page_does_not_show_the_expected_output_comments(good_build):
    root, _, _ = good_build
    html = (root / "_build" / "html" / "auto_gallery" / "plot_demo.html").read_text()
    assert "Expected output" not in html
    assert "tensor(0.7500)" in html  # the real output is there


BAD_PAGE = (
    PAGE.replace("largest is 0.4950", "largest is 0.4970").replace(  # prose off by 0.0020
        "  tensor([0.4950, 0.5050])\n", "  tensor([0.4970, 0.5050])\n"
    )  # 20 units off
    + "\n```{code-cell} ipython3\nprint('unexpected')\n```\n"  # prints, no expect
    + "\n```{code-cell} ipython3\n---\nexpect: |\n  1\n---\nx = 1\n```\n"  # expects, silent
    + "\n```{code-cell} ipython3\n---\nexpect: |\n  3\nunchecked: a draw\n---\nprint(3)\n```\n"
    + "\n```{code-cell} ipython3\nraise ValueError('scaling broke')\n```\n"  # raises
    + "\n```{code-cell} ipython3\n---\nexpect: |\n  2\n---\nprint(2)\n```\n"  # never runs
)
BAD_SCRIPT = (
    SCRIPT.replace("The sum is 0.75.", "The sum is 0.77.").replace(  # prose off by 0.02
        "# tensor([0.2500, 0.5000])", "# tensor([0.2500, 0.5200])"
    )  # 200 units off
    + "print(torch.zeros(2))\n"  # one more tensor at the end, with no expected output
    # One unit off: passes on this machine, fails where the last digit is one lower.
    + '\n# %%\n# Two thirds.\n\nprint(f"{2 / 3:.4f}")\n# Expected output:\n# 0.6668\n'
)


@pytest.fixture(scope="module")
def bad_build(tmp_path_factory):
    """Planted mistakes, checked as on another CPU: each must still be reported."""
    root = make_project(tmp_path_factory.mktemp("bad"), BAD_PAGE, BAD_SCRIPT)
    return root, *build(root)


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


PLANTED = {
    "a value 20 units off in a page": (
        f"page.md:{line_of(BAD_PAGE, 'print(torch.tensor([0.4950')}",
        "code cell 2 printed something other than its expected output: numbers differ",
        "line 1: expected 0.4970, printed 0.4950 (off by 0.002; tolerance 0.00015)",
    ),
    "a number in a page's prose off by 0.0020": (
        f"page.md:{line_of(BAD_PAGE, 'largest is 0.4970')}",
        "the prose says 0.4970, but the page printed no value",
        "",
    ),
    "a page cell that prints with no expect": (
        f"page.md:{line_of(BAD_PAGE, 'print(' + chr(39) + 'unexpected')}",
        "code cell 4 prints output but has no expected output",
        "  unexpected",
    ),
    "a page cell that expects output and prints none": (
        f"page.md:{line_of(BAD_PAGE, 'x = 1')}",
        "code cell 5 expects output but printed nothing",
        "",
    ),
    "a page cell with both an expect and 'unchecked'": (
        f"page.md:{line_of(BAD_PAGE, 'print(3)')}",
        "code cell 6 has both an expected output and 'unchecked'",
        "",
    ),
    "a cell that raises (the build goes on)": (
        f"page.md:{line_of(BAD_PAGE, 'scaling broke')}",
        "code cell 7 raised ValueError: scaling broke; cell 8 did not run",
        "",
    ),
    "myst-nb's own report of the raising page": (
        "page.md",
        "Executing notebook failed: CellExecutionError",
        "",
    ),
    "a value off in a script": (
        f"gallery/plot_demo.py:{line_of(BAD_SCRIPT, 'print(torch.tensor([0.25, 0.5]))')}",
        "this code block printed something other than its expected output: numbers differ",
        "line 1: expected 0.5200, printed 0.5000",
    ),
    "an extra tensor printed at the end of a script": (
        f"gallery/plot_demo.py:{line_of(BAD_SCRIPT, 'print(torch.tensor(0.75))')}",
        "this code block printed something other than its expected output: the text around",
        "+tensor([0., 0.])",
    ),
    "a value one unit off in a script, which another CPU's last digit breaks": (
        f"gallery/plot_demo.py:{line_of(BAD_SCRIPT, '2 / 3')}",
        "this code block would print something other than its expected output on another CPU",
        "line 1: expected 0.6668, printed 0.6666",
    ),
    "a number in a script's text off by 0.02": (
        f"gallery/plot_demo.py:{line_of(BAD_SCRIPT, 'The sum is 0.77')}",
        "the prose says 0.77, but the page printed no value",
        "",
    ),
}


def warnings_by_location(text: str) -> dict[str, str]:
    """Each warning's location (``file:line``, relative) and its whole message."""
    found, current = {}, None
    for line in text.splitlines():
        if ": WARNING: " in line:
            where, _, message = line.partition(": WARNING: ")
            current = where.split("/docs/")[-1] if "/docs/" in where else where
            found[current] = f"{found[current]}\n{message}" if current in found else message
        elif current:
            found[current] += "\n" + line
    return found


@pytest.mark.parametrize(("where", "message", "detail"), PLANTED.values(), ids=PLANTED.keys())
def test_planted_mistakes_are_reported_at_their_lines(bad_build, where, message, detail):
    _, _, warnings = bad_build
    found = warnings_by_location(warnings)
    assert where in found, warnings
    assert found[where].startswith(message), found[where]
    assert detail in found[where]


def test_nothing_else_is_reported(bad_build):
    _, _, warnings = bad_build
    assert len(warnings_by_location(warnings)) == len(PLANTED), warnings


# -- The pieces, without a build ----------------------------------------------------


def stream(text: str, name: str = "stdout") -> nbformat.NotebookNode:
    return nbformat.v4.new_output("stream", name=name, text=text)


def test_printed_text_is_stdout_and_results_not_stderr_or_figures():
    cell = nbformat.v4.new_code_cell(
        "x",
        outputs=[
            stream("a  \n"),
            stream("warning\n", name="stderr"),
            nbformat.v4.new_output("execute_result", data={"text/plain": "tensor(1.)"}),
            nbformat.v4.new_output("display_data", data={"image/png": "", "text/plain": "Fig"}),
        ],
    )
    assert printed_text(cell) == "a\ntensor(1.)"


def printed_block(text: str) -> nodes.literal_block:
    return nodes.literal_block(text, text, classes=["output", "stream"])


def test_join_printed_chunks_joins_neighbouring_blocks_exactly():
    output = nodes.container(classes=["cell_output"])
    stderr = nodes.literal_block("err\n", "err\n", classes=["output", "stderr"])
    output += [printed_block("tensor([0.1,"), printed_block(" 0.2])\n"), stderr]
    output += [printed_block("after\n"), printed_block("the warning\n")]
    document = utils.new_document("page")
    document += output
    assert join_printed_chunks(document) == 2
    assert [block.astext() for block in output.children] == [
        "tensor([0.1, 0.2])\n",
        "err\n",
        "after\nthe warning\n",
    ]


def test_a_chunked_print_is_saved_as_sent_and_shown_as_one_line(good_build):
    root, _, _ = good_build
    executed = nbformat.read(root / "_build" / "jupyter_execute" / "page.ipynb", as_version=4)
    chunked = [cell for cell in executed.cells if cell.cell_type == "code"][-1]
    # myst-nb's own merging would have rewritten these in place: first chunk plus a
    # newline, then the second again (and the line broken in two on the page).
    assert [(out.name, out.text) for out in chunked.outputs] == [
        ("stdout", "printed in two chunks,"),
        ("stdout", " on one line\n"),
    ]
    html = (root / "_build" / "html" / "page.html").read_text()
    assert "printed in two chunks, on one line" in html
    assert html.count('class="output stream') == 2  # one block for each printing cell


def test_verify_outputs_warns_when_myst_nb_would_merge_streams(caplog):
    import verify_outputs

    verify_outputs.on_config_inited(None, SimpleNamespace(nb_merge_streams=True))
    assert "leave it off" in caplog.text
    caplog.clear()
    verify_outputs.on_config_inited(None, SimpleNamespace(nb_merge_streams=False))
    assert caplog.text == ""


def test_the_saved_notebook_has_its_outputs_run_or_taken_from_the_cache(tmp_path):
    root = make_project(tmp_path)
    saved = root / "_build" / "jupyter_execute" / "page.ipynb"
    for run in ("run", "kept"):  # reuse mode: the second build runs nothing
        code, warnings = build(root, ATTENTION_DOCS_CACHE="1")
        assert code == 0 and warning_lines(warnings) == [], (run, warnings)
        # myst-nb 1.4 saves a page taken from its cache without its outputs;
        # page_runs.restore_outputs puts them back.
        executed = nbformat.read(saved, as_version=4)
        code_cells = [cell for cell in executed.cells if cell.cell_type == "code"]
        assert [bool(cell.outputs) for cell in code_cells] == [False, True, True], run
        saved.unlink()
    records = get_cache(root / "_build" / "jupyter_cache").list_cache_records()
    assert [Path(record.uri).name for record in records] == ["page.md"]


def test_the_gallery_thumbnail_says_what_its_figure_says(good_build):
    root, _, _ = good_build
    index = (root / "_build" / "html" / "auto_gallery" / "index.html").read_text()
    thumbnail = re.search(r"<img [^>]*sphx_glr_plot_demo_thumb\.png[^>]*>", index).group(0)
    # The second figure, as the script's sphinx_gallery_thumbnail_number says.
    assert re.search(r'alt="([^"]*)"', thumbnail).group(1) == "The second figure"
    page = (root / "auto_gallery" / "plot_demo.rst").read_text()
    assert figure_alt(page, "plot_demo", 1) == "The first figure"
    assert figure_alt(page, "plot_demo", 3) is None


def test_figures_need_alt_text_and_alt_text_needs_a_figure():
    figure = nbformat.v4.new_output("display_data", data={"image/png": ""})
    without_alt = nbformat.v4.new_code_cell("plt.show()", outputs=[figure])
    with_alt = copy.deepcopy(without_alt)
    with_alt.metadata["mystnb"] = {"image": {"alt": "A heatmap"}}
    no_figure = nbformat.v4.new_code_cell("x = 1", metadata=with_alt.metadata)
    assert "without alt text" in figure_problems(without_alt, 1)[0]
    assert figure_problems(with_alt, 1) == []
    assert "drew no figure" in figure_problems(no_figure, 1)[0]


def test_prose_is_the_text_outside_front_matter_and_code():
    lines = dict(prose_lines(PAGE))
    assert lines[line_of(PAGE, "sum to 1.00")].startswith("The weights")
    assert line_of(PAGE, "print(torch.ones") not in lines
    assert line_of(PAGE, "file_format") not in lines


def test_a_script_states_its_expected_output_in_comments():
    expected, unchecked = expected_output(SCRIPT.split("# %%")[1])
    assert expected == "tensor([0.2500, 0.5000])\ntensor([1., 1.])"
    assert unchecked is None
    assert expected_output("# Unchecked output: a random draw\nprint(x)") == (
        None,
        "a random draw",
    )
    assert expected_output("print(x)") == (None, None)
    assert "Expected output" not in without_expectations(SCRIPT)
    assert "print(torch.ones(2))" in without_expectations(SCRIPT)


def test_block_outputs_are_read_from_the_generated_page(good_build):
    root, _, _ = good_build
    outputs = block_outputs((root / "auto_gallery" / "plot_demo.rst").read_text())
    first_block = line_of(SCRIPT, "# Two numbers.") + 1
    assert outputs[first_block].splitlines()[0] == "tensor([0.2500, 0.5000])"


def test_fill_expected_writes_what_a_page_printed(good_build, tmp_path):
    root, _, _ = good_build
    page = tmp_path / "page.md"
    page.write_text(PAGE.replace("  tensor([0.4950, 0.5050])\n  tensor([1., 1., 1.])\n", ""))
    page.write_text(page.read_text().replace("---\nexpect: |\n---\n", ""))
    executed = root / "_build" / "jupyter_execute" / "page.ipynb"
    assert fill(page, executed, update=False) == 1
    # Written from the build: what it printed, as it printed it.
    assert "expect: |\n  tensor([0.4950, 0.5050])\n  tensor([1., 1., 1.])" in page.read_text()


def test_fill_expected_writes_what_a_script_printed(tmp_path):
    script = tmp_path / "plot_demo.py"
    script.write_text(without_expectations(SCRIPT) + "\n")
    assert fill_script(script, update=False) == 3
    assert script.read_text() == SCRIPT
    assert fill_script(script, update=False) == 0  # nothing left to write
