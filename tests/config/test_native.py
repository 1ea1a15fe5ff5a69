"""The compiled decision code runs only while its build is whole and current (config.native)."""

import json
import sys
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
