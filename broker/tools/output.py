"""What the tools print, as Kafka's tools print it: tables of left-aligned columns one
space apart, errors as `Error: ...` on stderr, and whether any error was printed (the
exit code)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import TextIO

MISSING = "-"  # Kafka's MISSING_COLUMN_VALUE: a value that is not known or does not apply


class Output:
    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.failed = False

    def line(self, text: str = "") -> None:
        print(text, file=self.out)

    def note(self, text: str) -> None:
        """A remark about the state of things (stderr), not an error."""
        print(text, file=self.err)

    def warn(self, text: str) -> None:
        print(f"WARN: {text}", file=self.err)

    def error(self, text: str) -> None:
        """An error: printed, and the tool exits non-zero at the end."""
        print(f"Error: {text}", file=self.err)
        self.failed = True

    def table(
        self,
        header: Sequence[str],
        rows: Iterable[Sequence[object]],
        widths: Sequence[int],
    ) -> None:
        """A blank line, the header, the rows. `widths` are the minimum widths of every
        column but the last (Kafka's `%-15s` and friends); a column widens to its longest
        value, as Kafka's tools compute theirs."""
        rows = [[MISSING if v is None else str(v) for v in row] for row in rows]
        widths = [
            max([w, len(header[i])] + [len(r[i]) for r in rows]) for i, w in enumerate(widths)
        ]
        self.line()
        for row in [list(header), *rows]:
            cells = [v.ljust(w) for v, w in zip(row, widths, strict=False)]
            self.line(" ".join(cells + row[len(widths) :]).rstrip())
