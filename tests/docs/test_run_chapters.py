"""docs/tools/run_chapters.py: a chapter run outside the build fails where the build would."""

import run_chapters

CHAPTER = """# A chapter

```{code-cell} ipython3
---
expect: |
  1
---
print(1)
```

```{code-cell} ipython3
import warnings

warnings.warn("`old` is renamed `new`", FutureWarning)
```

```{code-cell} ipython3
---
expect: |
  3
---
print(2)
```

```{code-cell} ipython3
raise ValueError("stop here")
```

```{code-cell} ipython3
print("never runs")
```
"""


def test_stderr_a_wrong_value_and_an_error_are_each_named_by_their_cell(tmp_path):
    chapter = tmp_path / "chapter.md"
    chapter.write_text(CHAPTER, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()

    problems = run_chapters.run_chapter(chapter, work)

    assert len(problems) == 3, problems
    stderr, wrong, error = problems
    assert stderr.startswith("code cell 2 wrote to stderr:")
    assert "FutureWarning: `old` is renamed `new`" in stderr
    assert wrong.startswith("code cell 3 printed something other than its expected output")
    assert error.startswith("code cell 4 raised ValueError: stop here; cell 5 did not run")
