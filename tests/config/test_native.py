"""A compiled copy of the decision code runs only while it is the compilation of its source as it is now."""

import hashlib
import json
import subprocess
import sys
import textwrap
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

from config import native


def project(root: Path, source: str) -> Path:
    """A project with one module, ``pkg.mod``, whose compiled copy is recorded as built from ``source``."""
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    module = root / "pkg" / "mod.py"
    module.write_text(source)
    (root / "build").mkdir()
    (root / native.STAMP).write_text(json.dumps({"pkg.mod": hashlib.sha256(source.encode()).hexdigest()}))
    return module


def test_a_compiled_copy_is_current_while_its_source_is_as_it_was_compiled(tmp_path):
    project(tmp_path, "ANSWER = 1\n")
    (tmp_path / "pkg" / f"mod{EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    assert native.stale(tmp_path, ("pkg.mod",)) == []


def test_a_compiled_copy_is_stale_once_its_source_changes(tmp_path):
    module = project(tmp_path, "ANSWER = 1\n")
    (tmp_path / "pkg" / f"mod{EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    module.write_text("ANSWER = 2\n")
    assert native.stale(tmp_path, ("pkg.mod",)) == ["pkg.mod"]


def test_a_source_without_a_compiled_copy_is_never_stale(tmp_path):
    module = project(tmp_path, "ANSWER = 1\n")
    module.write_text("ANSWER = 2\n")
    assert native.stale(tmp_path, ("pkg.mod",)) == []


def test_preferring_sources_imports_the_source_beside_a_compiled_copy(tmp_path):
    """With a real extension module of the same name beside the source: the default imports the
    extension; preferring sources imports the source, and leaves other directories alone."""
    project(tmp_path, "ANSWER = 'source'\n")
    # Any real extension module will do as the "compiled copy": it only has to load first by default.
    import _json

    (tmp_path / "pkg" / f"mod{EXTENSION_SUFFIXES[0]}").write_bytes(Path(_json.__file__).read_bytes())
    probe = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from config import native
        from pathlib import Path
        if sys.argv[1] == "sources":
            native.prefer_sources(Path({str(tmp_path)!r}), ("pkg.mod",))
        import pkg.mod, json
        print(Path(pkg.mod.__file__).suffix, json.__file__ is not None)
        """
    )
    run = [sys.executable, "-c", probe]
    default = subprocess.run([*run, "default"], cwd=native.ROOT, capture_output=True, text=True, check=False)
    sources = subprocess.run([*run, "sources"], cwd=native.ROOT, capture_output=True, text=True, check=True)
    # The copy is not a real compilation of pkg.mod: imported, it fails for want of its init function.
    assert "PyInit_mod" in default.stderr
    assert sources.stdout.split() == [".py", "True"]


@pytest.mark.parametrize("value", ["false", "0", "off", " FALSE "])
def test_notify_native_false_runs_the_sources(value, monkeypatch):
    preferred = []
    monkeypatch.setattr(native, "prefer_sources", lambda: preferred.append(True))
    native.choose({"NOTIFY_NATIVE": value})
    assert preferred == [True]


def test_a_stale_copy_is_passed_over_with_a_warning(monkeypatch):
    preferred = []
    monkeypatch.setattr(native, "prefer_sources", lambda: preferred.append(True))
    monkeypatch.setattr(native, "stale", lambda: ["notify.machine"])
    with pytest.warns(RuntimeWarning, match="notify.machine: changed since compiled"):
        native.choose({})
    assert preferred == [True]


def test_current_copies_are_used(monkeypatch):
    preferred = []
    monkeypatch.setattr(native, "prefer_sources", lambda: preferred.append(True))
    monkeypatch.setattr(native, "stale", lambda: [])
    native.choose({})
    assert preferred == []
