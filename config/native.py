"""The decision code, compiled with mypyc apart from its source, and used only while it is current.

``MODULES`` are the pure rules: the worker's decisions (``notify.rules.machine``), the transition
table's plans with the in-memory half of every write (``notify.rules.plan``), and the replay that
runs both over history (``runbook.replay.record``, ``runbook.replay.simulate``): the whole inner
loop of a replay, spread thin over many small functions, which is where an interpreter's overhead
is all of the cost. Compiled, the same
source replays a record in about two-thirds of the time (docs/benchmarks.md,
``replay_records_per_s``). It is the same code, not a second model of it: the live worker runs
the compiled copy too, and ``tests/replay/test_native.py`` requires both forms to replay
generated records to identical outcomes.

``make native`` (``native.build()``) compiles them into ``build/native/``, never beside the
sources, with a stamp of what it built: the interpreter, each source's digest, every file. Before
anything of the project is imported (``config/__init__``), ``choose()`` puts a finder for those
files first on the import path only if the stamp is whole and matches the sources as they are
now. So a source changed since, a partial build, another interpreter, or a checkout of any other
commit (which knows nothing of ``build/native/``) runs the sources; a stale build says so with a
warning. ``NOTIFY_NATIVE=false`` runs the sources on purpose.
"""

import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec
from pathlib import Path
from types import ModuleType

from config.env import env_bool

MODULES = ("notify.rules.machine", "notify.rules.plan", "runbook.replay.record", "runbook.replay.simulate")
ROOT = Path(__file__).resolve().parent.parent
OUT = "build/native"  # the compiled files, under ROOT
STAMP = "native.json"  # under OUT


def source(module: str, root: Path = ROOT) -> Path:
    return root / (module.replace(".", "/") + ".py")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _stamp(root: Path, modules: Sequence[str]) -> dict[str, object]:
    return {"python": sys.version, "modules": {module: _digest(source(module, root)) for module in modules}}


class _Compiled(MetaPathFinder):
    """Finds the compiled files by module name (the modules, and the runtime library they share)."""

    def __init__(self, files: Mapping[str, Path]) -> None:
        self.files = files

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        found = self.files.get(fullname)
        return None if found is None else importlib.util.spec_from_file_location(fullname, found)


def current(root: Path = ROOT, modules: Sequence[str] = MODULES) -> tuple[dict[str, Path] | None, str]:
    """The compiled files by module name if the build is whole and current, else None and why not."""
    out = root / OUT
    try:
        built = json.loads((out / STAMP).read_text())
    except (OSError, ValueError):
        return None, "not compiled (make native)"
    if {key: built.get(key) for key in ("python", "modules")} != _stamp(root, modules):
        return None, "changed since compiled, or compiled for another interpreter (make native compiles them again)"
    files = {name: out / relative for name, relative in built.get("files", {}).items()}
    if set(modules) - set(files) or not all(path.is_file() for path in files.values()):
        return None, "compiled only in part (make native compiles them again)"
    return files, ""


def choose(root: Path = ROOT, modules: Sequence[str] = MODULES) -> bool:
    """Import the compiled copies from here on if they are current; return whether they will be."""
    if not env_bool("NOTIFY_NATIVE", True):  # a malformed value stops start-up, as every setting's does
        return False
    files, why_not = current(root, modules)
    if files is None:
        if (root / OUT).exists():  # a build there, but not for these sources: worth saying
            warnings.warn(f"{', '.join(modules)}: {why_not}; running the sources", RuntimeWarning, stacklevel=2)
        return False
    sys.meta_path.insert(0, _Compiled(files))
    return True


def _module_name(extension: Path, root: Path) -> str:
    """The dotted name an extension module under ``root`` is imported by."""
    relative = extension.relative_to(root)
    return ".".join([*relative.parent.parts, extension.name.split(".")[0]])


def _beside(source: Path) -> Path:
    """The extension module mypyc wrote beside ``source``."""
    (found,) = [path for suffix in EXTENSION_SUFFIXES if (path := source.with_suffix(suffix)).exists()]
    return found


def build(root: Path = ROOT, modules: Sequence[str] = MODULES, run: Callable[..., object] = subprocess.run) -> None:
    """Compile ``modules`` with mypyc into ``build/native/``, unless a current build is there."""
    if current(root, modules)[0] is not None:
        print(f"native: {', '.join(modules)} up to date")
        return
    stamp = _stamp(root, modules)  # before: a source edited during the build shows as a stale build
    out = root / OUT
    shutil.rmtree(out, ignore_errors=True)  # the stamp first of all: a failed build leaves none
    for module in modules:  # and any copy beside a source (an older layout's), which would shadow it
        for suffix in EXTENSION_SUFFIXES:
            source(module, root).with_suffix(suffix).unlink(missing_ok=True)
    places = {root, *(source(module, root).parent for module in modules)}
    for place in places:  # and any library an interrupted or other build left where this one's go
        for library in place.glob("*__mypyc.*"):
            library.unlink()
    # mypyc type-checks with the project's mypy configuration (django-stubs included), writes the
    # extension modules beside the sources and the library of their compiled code: in its working
    # directory for several modules, beside the source for one. All of them are moved out at once,
    # so a source is never shadowed by its copy.
    sources = [str(source(module, root).relative_to(root)) for module in modules]
    run([sys.executable, "-m", "mypyc", *sources], cwd=root, check=True)
    made = {module: _beside(source(module, root)) for module in modules}
    for place in places:
        made.update({_module_name(library, root): library for library in place.glob("*__mypyc.*")})
    files = {name: str(path.relative_to(root)) for name, path in made.items()}
    for name, path in made.items():
        target = out / files[name]
        target.parent.mkdir(parents=True, exist_ok=True)
        path.replace(target)
    scratch = out / f"{STAMP}.new"
    scratch.write_text(json.dumps({**stamp, "files": files}, indent=1) + "\n")
    scratch.replace(out / STAMP)  # whole or not at all
    print(f"native: compiled {', '.join(modules)} into {OUT}")
