"""The layout the README describes: no import circle, and the product never imports the simulator."""

import graphlib

import grimp
import pytest

PRODUCT = ("notify", "policies", "runbook", "config")
PACKAGES = (*PRODUCT, "simulator")


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
    assert edges["notify"] == {"policies"}


@pytest.mark.parametrize("package", PRODUCT)
def test_the_product_never_imports_the_simulator(imports, package):
    assert imports.find_shortest_chain(importer=package, imported="simulator", as_packages=True) is None


def test_a_circle_is_reported_with_its_path():
    # The check itself can fail: a two-module circle is found and named.
    assert _first_circle({"a.one": {"a.two"}, "a.two": {"a.one"}}) in (
        ["a.one", "a.two", "a.one"],
        ["a.two", "a.one", "a.two"],
    )
