"""The benchmarks' CPU accounting from /proc."""

import os
import subprocess
import sys

from bench import processes


def test_a_child_that_exited_keeps_its_cpu_in_its_parent_s_sum():
    before = processes.cpu_seconds(os.getpid())
    # A child that burns about 0.3 s of CPU and exits: reaped by run(), it is no descendant any more.
    subprocess.run(
        [sys.executable, "-c", "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"],
        check=True,
    )

    assert processes.cpu_seconds(os.getpid()) - before >= 0.25
