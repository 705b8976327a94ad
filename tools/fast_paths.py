#!/usr/bin/env python
"""Write docs/fast-paths.md: the path every registered optimizer takes (dpsim.explain.path_table)."""

from pathlib import Path

from dpsim.explain import path_table_markdown

if __name__ == "__main__":
    out = Path(__file__).resolve().parents[1] / "docs" / "fast-paths.md"
    out.write_text(path_table_markdown())
    print(f"wrote {out}")
