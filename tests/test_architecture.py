"""The layout the README describes: no import circle, the product never imports the simulator, the
rules pure and the writes in one home below their callers, no module too long to read, and no model
change without its migration."""

import graphlib
import re
from pathlib import Path

import grimp
import pytest
from django.core.management import call_command

PRODUCT = ("notify", "policies", "runbook", "config", "plumbing")
PACKAGES = (*PRODUCT, "simulator")
ROOT = Path(__file__).resolve().parent.parent

LONGEST = 500


@pytest.fixture(scope="module")
def imports() -> grimp.ImportGraph:
    # TYPE_CHECKING imports count: a circle kept only for the type checker is still a circle
    # for the reader, and the first runtime import along it makes it a real one.
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def _first_circle(edges: dict[str, set[str]]) -> list[str]:
    try:
        graphlib.TopologicalSorter(edges).prepare()
    except graphlib.CycleError as circle:
        return list(circle.args[1])
    return []


def test_no_module_imports_itself_through_others(imports):
    edges = {module: imports.find_modules_directly_imported_by(module) for module in imports.modules}
    assert _first_circle(edges) == []


def test_no_package_imports_another_that_imports_it_back(imports):
    edges = {
        importer: {
            imported
            for imported in PACKAGES
            if imported != importer
            and imports.direct_import_exists(importer=importer, imported=imported, as_packages=True)
        }
        for importer in PACKAGES
    }
    assert _first_circle(edges) == []
    assert edges["policies"] == set()  # the rules stand alone
    assert edges["plumbing"] == set()  # generic: it knows nothing of delivery
    assert edges["notify"] == {"policies", "plumbing"}
    assert edges["runbook"] <= {"notify", "policies", "plumbing"}


@pytest.mark.parametrize("package", PRODUCT)
def test_the_product_never_imports_the_simulator(imports, package):
    assert imports.find_shortest_chain(importer=package, imported="simulator", as_packages=True) is None


RULES = "notify.rules"


def test_the_rules_import_nothing_of_ours_but_themselves_and_the_policy_type(imports):
    # Pure: no database, no clock, no writer; the worker, the console and the replay ask them alike.
    rules = imports.find_descendants(RULES) | {RULES}
    for module in rules:
        ours = {found for found in imports.find_modules_directly_imported_by(module) if found.split(".")[0] in PACKAGES}
        assert ours <= rules | {"policies.models"}, module


def test_mypyc_compiles_only_pure_code_the_rules_and_the_replay_over_them(imports):
    from config import native

    assert {f"{RULES}.machine", f"{RULES}.plan"} <= set(native.MODULES)
    for module in native.MODULES:
        if not module.startswith(RULES):
            assert module.startswith("runbook.replay."), module
            reached = imports.find_downstream_modules(module)
            assert not {found for found in reached if found.startswith(("notify.writes", "notify.worker"))}, module


WRITES = "notify.writes"
# Who may call the write path: it sits below every caller and knows none of them.
CALLERS = ("notify.api", "notify.callbacks", "notify.worker", "notify.tasks", "runbook", "config")


def test_the_write_path_imports_none_of_its_callers(imports):
    writes = imports.find_descendants(WRITES) | {WRITES}
    for module in writes:
        for found in imports.find_modules_directly_imported_by(module):
            assert not found.startswith(CALLERS), f"{module} imports {found}"


# A statement that changes one of an event's rows, written out or through the ORM.
_EVENT_TABLES = r"notify_(?:event|claim|observation|transition|vaultentry)\b"
_WRITES_SQL = re.compile(rf"(?:UPDATE|INSERT INTO|DELETE FROM)\s+{_EVENT_TABLES}", re.IGNORECASE)
_WRITES_ORM = re.compile(
    r"\b(?:Event|Claim|Observation|Transition|VaultEntry)\.objects\b[^\n]*\.(?:update|delete|create)\("
)


def _product_sources(outside: str = "") -> dict[str, str]:
    return {
        path.relative_to(ROOT).as_posix(): path.read_text()
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts and not (outside and path.relative_to(ROOT).as_posix().startswith(outside))
    }


def _writers(sources: dict[str, str]) -> set[str]:
    return {path for path, text in sources.items() if _WRITES_SQL.search(text) or _WRITES_ORM.search(text)}


def test_only_the_write_path_writes_an_events_rows():
    assert _writers(_product_sources(outside="notify/writes/")) == set()


def test_a_write_outside_the_write_path_is_reported():
    # The check itself can fail: each kind of write is found.
    found = _writers(
        {
            "sql.py": 'cursor.execute("UPDATE notify_event SET state = %s")',
            "orm.py": "Claim.objects.filter(pk=1).update(state='failed')",
            "read.py": "SELECT * FROM notify_event",
        }
    )
    assert found == {"sql.py", "orm.py"}


def test_one_function_sends_a_wake_up():
    # The broker's publish is called from one place; everyone else hands a WakeUp to send_after_commit.
    sources = _product_sources()
    publishers = {path for path, text in sources.items() if "publish_advance(" in text}
    assert publishers == {"notify/broker.py", "notify/writes/wake_ups.py"}
    senders = {path for path, text in sources.items() if "send_after_commit(" in text}
    assert senders
    assert all(path.startswith(("notify/writes/", "notify/worker/")) for path in senders), senders


def test_a_circle_is_reported_with_its_path():
    # The check itself can fail: a two-module circle is found and named.
    assert _first_circle({"a.one": {"a.two"}, "a.two": {"a.one"}}) in (
        ["a.one", "a.two", "a.one"],
        ["a.two", "a.one", "a.two"],
    )


def _lines_of_product_modules() -> dict[str, int]:
    # Migrations are generated, read by Django rather than by people.
    return {
        path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines())
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
    }


def _too_long(lines: dict[str, int]) -> dict[str, int]:
    return {path: count for path, count in lines.items() if count > LONGEST}


def test_no_product_module_is_longer_than_500_lines():
    assert _too_long(_lines_of_product_modules()) == {}


def test_a_long_module_is_reported():
    # The check itself can fail.
    assert _too_long({"long.py": 501, "fits.py": 500}) == {"long.py": 501}


@pytest.mark.django_db
def test_every_model_change_has_its_migration():
    # A moved or renamed model, field or choice label that Django sees as a change exits non-zero here.
    call_command("makemigrations", check=True, dry_run=True, verbosity=0)
