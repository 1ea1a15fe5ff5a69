"""Sampling profiles of running processes (py-spy), summed into where the time goes.

The benchmarks attach py-spy to the real worker and web processes while the load runs
(nothing in the project is instrumented), write the raw collapsed stacks beside the logs,
and print the frames that hold the largest share of the samples.
"""

import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Share:
    frame: str
    inclusive: float  # share of all samples with this frame on the stack
    own: float  # share of all samples with this frame on top


class Recording:
    """``py-spy record`` of a process and its children for ``seconds``, in collapsed-stack form.

    ``wall``: every sample of every thread, waits included (where a single-threaded worker's
    time goes); otherwise only samples holding the GIL (where the CPU goes, for a server
    whose threads mostly wait their turn).
    """

    def __init__(self, pid: int, output: Path, *, seconds: float, wall: bool, rate: int = 100) -> None:
        self.output = output
        py_spy = Path(sys.executable).parent / "py-spy"
        command = [str(py_spy), "record", "--pid", str(pid), "--subprocesses", "--nonblocking"]
        command += ["--idle"] if wall else ["--gil"]
        command += ["--rate", str(rate), "--duration", str(round(seconds)), "--format", "raw", "--output", str(output)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait(self) -> Path:
        self.process.wait(timeout=120)
        return self.output


def shares(collapsed: Path) -> tuple[int, list[Share]]:
    """Return the count of busy samples and every frame's inclusive and own share of them.

    Busy: a project frame is on the stack. Samples of threads idle in a wait of their own
    (the pool's poll, the server's accept loop) are left out, so that the shares answer
    "where does the time of the work go". py-spy's per-process frames are dropped too.
    """
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in collapsed.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        frames = [_short(frame) for frame in stack.split(";") if not frame.startswith("process ")]
        if not any(_is_project(frame) for frame in frames):
            continue
        count = int(count_text)
        total += count
        for frame in set(frames):
            inclusive[frame] += count
        own[frames[-1]] += count
    if not total:
        return 0, []
    ranked = sorted(inclusive, key=lambda frame: -inclusive[frame])
    return total, [Share(frame, inclusive[frame] / total, own[frame] / total) for frame in ranked]


def report(title: str, collapsed: Path, *, top: int = 14) -> str:
    """Format the project's frames and the heaviest library frames under them, by inclusive share."""
    total, ranked = shares(collapsed)
    lines = [f"  profile {title}: {total} busy samples ({collapsed.name})"]
    # Frames under every busy sample (a thread's bootstrap, the pool's task runner) say nothing.
    shown = [share for share in ranked if share.inclusive < 0.995][:top]
    lines += [f"    {share.inclusive:6.1%} incl {share.own:6.1%} own  {share.frame}" for share in shown]
    heaviest_own = sorted(ranked, key=lambda share: -share.own)[:6]
    lines.append("    own time: " + ", ".join(f"{share.frame} {share.own:.1%}" for share in heaviest_own))
    return "\n".join(lines)


PROJECT_PACKAGES = ("notify/", "policies/", "runbook/", "config/")
ROOT = str(Path(__file__).resolve().parent.parent) + "/"


def _is_project(frame: str) -> bool:
    return any(f"({package}" in frame for package in PROJECT_PACKAGES)


def _short(frame: str) -> str:
    """``func (path/to/site-packages/pkg/mod.py:12)`` -> ``func (pkg/mod.py)``; the line number is dropped."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "python3.11/", ROOT):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{name} ({path})" if path else name
