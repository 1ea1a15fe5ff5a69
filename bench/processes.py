"""Small helpers for the benchmarks and the chaos run that start real processes."""

import os
import socket
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, *, timeout: float = 30.0) -> bool:
    """Return once something listens on ``port`` (True), or False after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.2)
    return False


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """CPU time (user and system) of ``pid`` and its descendants so far, those that exited included."""
    return sum(_own_cpu_seconds(member) for member in [pid, *descendants(pid)])


def cpu_seconds_of(command_name: str) -> float:
    """CPU time so far of every process named ``command_name`` (postgres, redis-server), and of
    their children that exited (a PostgreSQL backend whose connection closed)."""
    return sum(_own_cpu_seconds(pid) for pid in _named(command_name))


def _own_cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0  # gone
    # utime and stime, then cutime and cstime: the CPU of children it reaped. Without them a
    # process that exits during a measurement takes its CPU out of the sum: a PostgreSQL backend
    # closing mid-drive once made a whoami cost -0.3 ms of PostgreSQL CPU. A child's own time
    # moves to its parent's at the reaping, so nothing is counted twice.
    return sum(int(field) for field in fields[11:15]) / CLOCK_TICKS


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants (a worker and its pool), in MB."""
    total_kb = 0
    for member in [pid, *descendants(pid)]:
        try:
            status = Path(f"/proc/{member}/status").read_text()
        except OSError:
            continue  # gone
        total_kb += next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    return total_kb / 1024


def descendants(pid: int) -> list[int]:
    try:
        children = [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []
    return children + [grandchild for child in children for grandchild in descendants(child)]


def _named(command_name: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == command_name:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found
