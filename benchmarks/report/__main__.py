"""`python -m benchmarks.report`: the command line of `benchmarks.report.cli`."""

from __future__ import annotations

import sys

from benchmarks.report.cli import main

if __name__ == "__main__":
    sys.exit(main())
