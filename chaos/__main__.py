"""python -m chaos [--points 100000] [--quick]: the fault-injection run behind `make chaos`.

Prints the summary table, writes it as JSON to var/chaos-<date>.json and exits non-zero on any
lost or duplicated point, missing or doubled side effect, or a backlog that did not drain.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from chaos.scenario import run_scenario, summary_table
from stack.processes import ROOT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("--points", type=int, default=100_000, help="points to send")
    parser.add_argument(
        "--quick", action="store_true", help="the short plan of `make test` (24 s of sending)"
    )
    parser.add_argument("--points-per-batch", type=int, default=400)
    args = parser.parse_args(argv)
    report = run_scenario(
        points=args.points, quick=args.quick, points_per_batch=args.points_per_batch
    )
    print(summary_table(report))
    out_dir = ROOT / "var"
    out_dir.mkdir(exist_ok=True)
    out = out_dir / f"chaos-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report.as_dict(), indent=2, default=str) + "\n")
    print(f"\nwritten to {out.relative_to(ROOT)}")
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
