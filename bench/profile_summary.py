"""Summarise py-spy's collapsed stacks (`py-spy record --format raw`, as bench/probes.py
`profiled` writes them): per function, the share of samples where it was running (self) and
where it was on the stack (cumulative, counted once per sample however deep it recurs), and
optionally the heaviest call paths through one function.

    .venv/bin/python -m bench.profile_summary FILE [FILE ...] [--top 25] [--lines]
        [--paths FUNCTION] [--depth 6]

Several files (e.g. one per broker) are summed. Samples whose innermost frame waits (select,
poll, wait, acquire) are left out unless --all: the shares are of the time spent working. Frames read `function (path:line)`;
without --lines the line is dropped, so a function is one row.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_LINE = re.compile(r":\d+\)$")


def frame_name(frame: str, lines: bool) -> str:
    """`function (path:line)` as py-spy writes it (paths already relative to their
    package), without the line unless `lines`."""
    return frame if lines else _LINE.sub(")", frame)


# Leaves that are waiting, not working: py-spy samples a thread blocked in epoll or on a
# lock as active at times (it sees it between the syscall's return and the GIL).
_WAITING = re.compile(r"^(\w+\.)?(select|poll|wait|acquire|_worker) \(")


def read_stacks(paths: list[Path], lines: bool, busy: bool) -> Counter[tuple[str, ...]]:
    stacks: Counter[tuple[str, ...]] = Counter()
    for path in paths:
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            frames = tuple(frame_name(f, lines) for f in stack.split(";"))
            if busy and _WAITING.match(frames[-1]):
                continue
            stacks[frames] += int(count)
    return stacks


def summarise(stacks: Counter[tuple[str, ...]], top: int) -> str:
    total = sum(stacks.values())
    own: Counter[str] = Counter()
    cumulative: Counter[str] = Counter()
    for stack, count in stacks.items():
        own[stack[-1]] += count
        for frame in set(stack):
            cumulative[frame] += count
    out = [f"{total:,} samples"]
    out.append(f"\n-- self (top {top}) --")
    out += [f"{n / total:6.1%}  {f}" for f, n in own.most_common(top)]
    out.append(f"\n-- cumulative (top {top}) --")
    out += [f"{n / total:6.1%}  {f}" for f, n in cumulative.most_common(top)]
    return "\n".join(out)


def paths_through(stacks: Counter[tuple[str, ...]], function: str, depth: int, top: int) -> str:
    """The heaviest callee paths below the first frame matching `function` (up to `depth`
    frames), and its callers."""
    total = sum(stacks.values())
    below: Counter[tuple[str, ...]] = Counter()
    above: Counter[str] = Counter()
    for stack, count in stacks.items():
        at = next((i for i, f in enumerate(stack) if function in f), None)
        if at is None:
            continue
        below[stack[at : at + depth]] += count
        above[stack[at - 1] if at else "<root>"] += count
    out = [f"\n-- through {function!r}: callers --"]
    out += [f"{n / total:6.1%}  {f}" for f, n in above.most_common(top)]
    out.append(f"-- through {function!r}: paths below ({depth} frames) --")
    out += [f"{n / total:6.1%}  {' > '.join(p)}" for p, n in below.most_common(top)]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--lines", action="store_true", help="one row per line, not function")
    parser.add_argument("--paths", action="append", default=[], help="a function to expand")
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument(
        "--all", action="store_true", help="keep samples waiting in select/poll/wait/acquire"
    )
    args = parser.parse_args()
    stacks = read_stacks(args.files, args.lines, busy=not args.all)
    print(summarise(stacks, args.top))
    for function in args.paths:
        print(paths_through(stacks, function, args.depth, args.top))


if __name__ == "__main__":
    main()
