"""hack/funclen.py: how a function's lines are counted and named."""

from __future__ import annotations

import textwrap

from hack.funclen import Length, lengths, over, renamed, render

SOURCE = textwrap.dedent(
    '''\
    import functools


    @functools.cache
    def top(a: int) -> int:
        """Doc."""

        # a comment
        return a


    class Pool:
        x = 1

        async def sync(self) -> None:
            def inner() -> None:
                pass

            inner()

        class Inner:
            def deep(self) -> None: ...


    if True:
        def guarded() -> None:
            return None
    '''
)


def test_lengths_count_def_to_last_line_without_decorators() -> None:
    found = {f.name: f.lines for f in lengths(SOURCE, "m.py")}
    assert found == {
        "top": 5,
        "Pool.sync": 5,
        "Pool.sync.inner": 2,
        "Pool.Inner.deep": 1,
        "guarded": 2,
    }


def test_lengths_keep_source_order_and_path() -> None:
    found = lengths(SOURCE, "pkg/m.py")
    assert [f.name for f in found] == [
        "top",
        "Pool.sync",
        "Pool.sync.inner",
        "Pool.Inner.deep",
        "guarded",
    ]
    assert found[0].key == "pkg/m.py:top"


def test_over_is_strictly_longer_longest_first() -> None:
    found = [Length("a.py", "f", 60), Length("a.py", "g", 61), Length("b.py", "h", 101)]
    assert [f.name for f in over(found, 60)] == ["h", "g"]
    assert [f.name for f in over(found, 100)] == ["h"]


def test_render_counts_and_lines_up_renamed_files() -> None:
    before = renamed([Length("old.py", "f", 120), Length("old.py", "g", 70)], {"old.py": "new.py"})
    after = [Length("new.py", "f", 40), Length("new.py", "g", 70)]
    table = render([("before", before), ("after", after)], 60).splitlines()
    assert "| functions over 60 lines | 2 | 1 |" in table
    assert "| functions over 100 lines | 1 | 0 |" in table
    assert table.index("| `new.py:f` | 120 | 40 |") < table.index("| `new.py:g` | 70 | 70 |")


def test_renamed_follows_git_then_a_unique_file_name() -> None:
    found = [Length("a/old.py", "f", 1), Length("a/status.py", "g", 2), Length("a/x.py", "h", 3)]
    now = ["b/new.py", "b/loops/status.py", "b/x.py", "c/x.py", "a/keep.py"]
    moved = renamed(found, {"a/old.py": "b/new.py"}, now)
    assert [f.path for f in moved] == ["b/new.py", "b/loops/status.py", "a/x.py"]
