"""The decision code, compiled with mypyc beside its source, and used only while it is current.

``MODULES`` are the worker's decisions (``notify.machine``), the transition table's plans with
the in-memory half of the writer (``notify.transitions``) and the replay that runs both over
history (``runbook.replay.simulate``): the whole inner loop of a replay, spread thin over many
small functions, which is where an interpreter's overhead is all of the cost. Compiled, the same
source replays a record in about two-thirds of the time (docs/benchmarks.md,
``replay_records_per_s``). It is the same code, not a second model of it: the live worker runs
the compiled copy too, and ``tests/replay/test_native.py`` requires both forms to replay
generated records to identical outcomes.

``make native`` (``native.build()``) compiles them in place. Python imports an
extension module before a source of the same name, so the compiled copy beside a source is what
runs. A copy is used only while it is the compilation of its source as the source is now: the
build records each source's digest, and before anything of the project is imported
(``config/__init__``) a copy whose source has changed since is passed over, with a warning,
and the sources are imported instead. ``NOTIFY_NATIVE=false`` passes over every copy.
"""

import hashlib
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from importlib.abc import PathEntryFinder
from importlib.machinery import (
    BYTECODE_SUFFIXES,
    EXTENSION_SUFFIXES,
    SOURCE_SUFFIXES,
    ExtensionFileLoader,
    FileFinder,
    SourceFileLoader,
    SourcelessFileLoader,
)
from pathlib import Path

MODULES = ("notify.machine", "notify.transitions", "runbook.replay.simulate")
ROOT = Path(__file__).resolve().parent.parent
# Each compiled source's digest as it was compiled, written by the build.
STAMP = "build/native.json"


def source(module: str, root: Path = ROOT) -> Path:
    return root / (module.replace(".", "/") + ".py")


def compiled(module: str, root: Path = ROOT) -> list[Path]:
    """The compiled copies of ``module`` beside its source (one per interpreter it was built for)."""
    stem = root / module.replace(".", "/")
    return [path for suffix in EXTENSION_SUFFIXES if (path := stem.with_name(stem.name + suffix)).exists()]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def stale(root: Path = ROOT, modules: tuple[str, ...] = MODULES) -> list[str]:
    """The modules with a compiled copy that is not the compilation of their source as it is now."""
    stamp = root / STAMP
    built = json.loads(stamp.read_text()) if stamp.exists() else {}
    current = {module: _digest(source(module, root)) for module in modules}
    return [module for module in modules if compiled(module, root) and built.get(module) != current[module]]


def prefer_sources(root: Path = ROOT, modules: tuple[str, ...] = MODULES) -> None:
    """Import ``modules`` from their sources even where a compiled copy sits beside them.

    A path hook ahead of the default one, for the compiled modules' own directories only, whose
    finder tries a source before an extension module (the default tries extensions first).
    Nothing else changes: other modules there, and every installed package, load as ever.
    """
    directories = {source(module, root).parent for module in modules}
    source_first = FileFinder.path_hook(
        (SourceFileLoader, SOURCE_SUFFIXES),
        (ExtensionFileLoader, EXTENSION_SUFFIXES),
        (SourcelessFileLoader, BYTECODE_SUFFIXES),
    )

    def hook(path: str) -> PathEntryFinder:
        if Path(path or ".").resolve() not in directories:
            raise ImportError("not a directory of the compiled modules")  # the next hook takes it
        return source_first(path)

    sys.path_hooks.insert(0, hook)
    sys.path_importer_cache.clear()  # finders already made for those directories would keep the old order


def choose(environ: dict[str, str] | os._Environ[str] = os.environ) -> None:
    """Run the compiled copies where they are current, the sources otherwise (before any import of them)."""
    if environ.get("NOTIFY_NATIVE", "true").strip().lower() in ("false", "0", "no", "off"):
        prefer_sources()
        return
    if changed := stale():
        warnings.warn(
            f"{', '.join(changed)}: changed since compiled; running the sources (make native compiles them again)",
            RuntimeWarning,
            stacklevel=2,
        )
        prefer_sources()


def build(run: Callable[..., object] = subprocess.run) -> None:
    """Compile ``MODULES`` in place with mypyc, unless every copy is already the current compilation."""
    stamp = ROOT / STAMP
    built = json.loads(stamp.read_text()) if stamp.exists() else {}
    digests = {module: _digest(source(module)) for module in MODULES}  # before: an edit during the build shows as stale
    if built == digests and all(compiled(module) for module in MODULES):
        print(f"native: {', '.join(MODULES)} up to date")
        return
    # Every copy goes, those of modules compiled before and no longer listed too (nothing would
    # check them), with the runtime library they shared: all are built anew together.
    old = {*MODULES, *built}
    for path in [*(path for module in old for path in compiled(module)), *ROOT.glob("*__mypyc.*")]:
        path.unlink()
    # mypyc type-checks with the project's mypy configuration (django-stubs included), then
    # writes the C, its objects (under build/) and the extension modules beside the sources.
    sources = [str(source(module).relative_to(ROOT)) for module in MODULES]
    run([sys.executable, "-m", "mypyc", *sources], cwd=ROOT, check=True)
    missing = [module for module in MODULES if not compiled(module)]
    if missing:
        raise SystemExit(f"native: mypyc built no extension module for {', '.join(missing)}")
    stamp.parent.mkdir(exist_ok=True)
    stamp.write_text(json.dumps(digests, indent=1) + "\n")
    print(f"native: compiled {', '.join(MODULES)}")
