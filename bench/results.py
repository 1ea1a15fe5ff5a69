"""The figures file: one entry per figure, comparable across commits."""

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"


def record(name: str, value: float, unit: str, ceiling: float) -> dict[str, float | str]:
    """Merge one figure into ``latest.json``, keeping the figures other benchmarks wrote."""
    figures = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    figure: dict[str, float | str] = {
        "value": round(value, 2),
        "unit": unit,
        "ceiling": round(ceiling, 2),
        "ratio": round(value / ceiling, 3),
    }
    figures[name] = figure
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    return figure


def print_table() -> None:
    figures = json.loads(RESULTS.read_text())
    print(f"{'figure':<32} {'value':>12} {'ceiling':>12} {'ratio':>7}  unit")
    for name, figure in sorted(figures.items()):
        print(f"{name:<32} {figure['value']:>12} {figure['ceiling']:>12} {figure['ratio']:>7}  {figure['unit']}")
