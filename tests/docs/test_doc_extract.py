"""doc_blocks.py finds the blocks a reader sees, with the marker just before each (checked on a
page written here, so a regex gone wrong cannot pass by finding nothing)."""
from doc_blocks import blocks, console_script

PAGE = """# A page

<!-- skip: needs a GPU -->
```python
gpu()
```

Text between.

<!-- slow: about a minute -->

```bash
long_job
```

<!-- file: train.py -->
```python
print("trained")
```

```console
$ autotile plan mlp \\
    --devices 8
plan: mlp
$ echo done
done
```

```
output, not run
```

    ```python
    indented four spaces: a code span, not a fence
    ```

```c
int main(void) { return 0; }
```
"""


def test_blocks_markers_and_languages(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(PAGE)
    got = blocks("docs/page.md", root=str(tmp_path))
    assert [(b.lang, b.kind, b.marker, b.reason) for b in got] == [
        ("python", "python", "skip", "needs a GPU"),
        ("bash", "bash", "slow", "about a minute"),
        ("python", "python", "file", "train.py"),
        ("console", "console", None, ""),
        ("", None, None, ""),
        ("c", None, None, ""),
    ]
    assert got[0].line == 4 and got[0].code == "gpu()\n"
    assert got[2].code == 'print("trained")\n'


def test_console_blocks_run_their_prompt_lines():
    code = "$ autotile plan mlp \\\n    --devices 8\nplan: mlp\n$ echo done\ndone\n"
    assert console_script(code) == "autotile plan mlp \\\n    --devices 8\necho done\n"
