"""The compiled decision code runs only while its build is whole and current (config.native)."""

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config import native

MODULES = ("pkg.mod",)
SUFFIX = ".cpython-311-x86_64-linux-gnu.so"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with one module, ``pkg.mod``, and a whole, current build of it."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("ANSWER = 1\n")
    out = tmp_path / native.OUT
    (out / "pkg").mkdir(parents=True)
    files = {"pkg.mod": f"pkg/mod{SUFFIX}", "abc__mypyc": f"abc__mypyc{SUFFIX}"}
    for relative in files.values():
        (out / relative).write_bytes(b"")
    stamp = native._stamp(tmp_path, MODULES)
    (out / native.STAMP).write_text(json.dumps({**stamp, "files": files}))
    return tmp_path


@pytest.fixture
def meta_path():
    """The import system's finders as they were (this process's own choice included), put back after."""
    before = list(sys.meta_path)
    yield before
    sys.meta_path[:] = before


def test_a_whole_current_build_is_found_by_module_name(project):
    files, _ = native.current(project, MODULES)

    assert files == {
        "pkg.mod": project / native.OUT / f"pkg/mod{SUFFIX}",
        "abc__mypyc": project / native.OUT / f"abc__mypyc{SUFFIX}",
    }


def test_a_build_is_stale_once_a_source_changes(project):
    (project / "pkg" / "mod.py").write_text("ANSWER = 2\n")

    files, why_not = native.current(project, MODULES)

    assert files is None
    assert "changed since compiled" in why_not


def test_a_build_for_another_interpreter_is_not_used(project):
    stamp = project / native.OUT / native.STAMP
    stamp.write_text(json.dumps({**json.loads(stamp.read_text()), "python": "3.11.0 (elsewhere)"}))

    assert native.current(project, MODULES)[0] is None


def test_a_build_missing_a_file_is_not_used(project):
    (project / native.OUT / f"abc__mypyc{SUFFIX}").unlink()  # the shared runtime

    files, why_not = native.current(project, MODULES)

    assert files is None
    assert "in part" in why_not


def test_no_build_runs_the_sources_without_a_word(tmp_path, meta_path, recwarn):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("ANSWER = 1\n")

    assert native.choose(tmp_path, MODULES) is False
    assert not recwarn.list


def test_a_stale_build_runs_the_sources_with_a_warning(project, meta_path):
    (project / "pkg" / "mod.py").write_text("ANSWER = 2\n")

    with pytest.warns(RuntimeWarning, match="pkg.mod: changed since compiled"):
        assert native.choose(project, MODULES) is False
    assert sys.meta_path == meta_path


def test_a_current_build_is_imported_first(project, meta_path):
    assert native.choose(project, MODULES) is True

    finder = sys.meta_path[0]
    assert isinstance(finder, native._Compiled)
    spec = finder.find_spec("pkg.mod", None)
    assert spec is not None
    assert spec.origin == str(project / native.OUT / f"pkg/mod{SUFFIX}")
    assert finder.find_spec("pkg.other", None) is None  # everything else is found as ever


@pytest.mark.parametrize("value", ["false", "0", "off", "FALSE"])
def test_notify_native_false_runs_the_sources(project, meta_path, monkeypatch, value):
    monkeypatch.setenv("NOTIFY_NATIVE", value)

    assert native.choose(project, MODULES) is False
    assert sys.meta_path == meta_path


def test_a_malformed_notify_native_stops_start_up(project, monkeypatch):
    monkeypatch.setenv("NOTIFY_NATIVE", "flase")

    with pytest.raises(ImproperlyConfigured, match="NOTIFY_NATIVE"):
        native.choose(project, MODULES)


PROBE = ("nativeprobe.decide",)
PROBE_SOURCE = "def twice(n: int) -> int:\n    return n * 2\n"


@pytest.fixture
def probe(tmp_path: Path, meta_path) -> Iterator[Path]:
    """A project of one small typed module, ``nativeprobe.decide``, not yet compiled."""
    (tmp_path / "nativeprobe").mkdir()
    (tmp_path / "nativeprobe" / "__init__.py").write_text("")
    (tmp_path / "nativeprobe" / "decide.py").write_text(PROBE_SOURCE)
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in [name for name in sys.modules if name.split(".")[0] == "nativeprobe"]:
        del sys.modules[name]


def test_a_build_compiles_apart_from_the_sources_and_is_imported_in_their_place(probe):
    # Left by an interrupted build, or one for another interpreter: not this build's, never stamped.
    (probe / f"0123abcd__mypyc{SUFFIX}").write_bytes(b"")
    (probe / "nativeprobe" / "decide__mypyc.cpython-310-x86_64-linux-gnu.so").write_bytes(b"")

    native.build(probe, PROBE)

    # Nothing compiled is left beside the source (found: for one module, mypyc writes the library
    # of its compiled code there, not in the working directory, and it stayed, out of the stamp).
    assert sorted(path.name for path in (probe / "nativeprobe").iterdir()) == ["__init__.py", "decide.py"]
    files, why_not = native.current(probe, PROBE)
    assert files is not None, why_not
    assert sorted(files) == ["nativeprobe.decide", "nativeprobe.decide__mypyc"]
    assert native.choose(probe, PROBE)
    decide = importlib.import_module("nativeprobe.decide")  # the scratch project's, on sys.path

    assert Path(decide.__file__ or "").suffix == ".so"
    assert decide.twice(21) == 42


def test_a_current_build_is_not_compiled_again(project):
    def run(*args, **kwargs):
        raise AssertionError("compiled again")

    native.build(project, MODULES, run=run)

    assert native.current(project, MODULES)[0] is not None


def test_a_failed_build_leaves_no_build_so_the_sources_run(project):
    (project / "pkg" / "mod.py").write_text("ANSWER = 2\n")  # stale: compiled again
    (project / "pkg" / f"mod{SUFFIX}").write_bytes(b"")  # a copy beside the source, from an older layout

    def run(*args, **kwargs):
        raise subprocess.CalledProcessError(1, "mypyc")

    with pytest.raises(subprocess.CalledProcessError):
        native.build(project, MODULES, run=run)

    assert not (project / native.OUT).exists()  # the stale build, stamp first, is gone
    assert not (project / "pkg" / f"mod{SUFFIX}").exists()  # and the copy that would shadow the source
    assert native.current(project, MODULES) == (None, "not compiled (make native)")
