"""The figures file: one entry per figure, comparable across commits."""

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"


def record(name: str, value: float, unit: str, ceiling: float | None) -> dict[str, float | str | None]:
    """Merge one figure into ``latest.json``, keeping the figures other benchmarks wrote.

    ``ceiling``: what the figure is held to, or None where nothing is; a ratio is kept only
    against a ceiling other than zero.
    """
    figures = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    figure: dict[str, float | str | None] = {
        "value": round(value, 2),
        "unit": unit,
        "ceiling": None if ceiling is None else round(ceiling, 2),
        "ratio": round(value / ceiling, 3) if ceiling else None,
    }
    figures[name] = figure
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    return figure


def print_table() -> None:
    figures = json.loads(RESULTS.read_text())
    print(f"{'figure':<36} {'value':>12} {'ceiling':>12} {'ratio':>7}  unit")
    for name, figure in sorted(figures.items()):
        ceiling, ratio = ("-" if figure[key] is None else figure[key] for key in ("ceiling", "ratio"))
        print(f"{name:<36} {figure['value']:>12} {ceiling:>12} {ratio:>7}  {figure['unit']}")
