"""Print the fuzzing tally tests/test_fuzz.py leaves in var/fuzz-summary.json (make chaos)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

SUMMARY = Path(__file__).resolve().parent.parent / "var" / "fuzz-summary.json"


def main() -> int:
    if not SUMMARY.exists():
        print(f"fuzzing: no summary at {SUMMARY} (did tests/test_fuzz.py run?)")
        return 1
    tally = json.loads(SUMMARY.read_text())
    print(
        f"fuzzing                          {tally['requests']:,} test cases "
        f"({tally['examples_per_operation']} examples per operation and principal), "
        f"{tally['failures']} failures"
    )
    return 0 if tally["failures"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
