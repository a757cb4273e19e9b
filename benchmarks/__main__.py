"""`python -m benchmarks SUITE [options]`: the same command as `structgen bench`."""

import sys

from benchmarks.suites import main

sys.exit(main())
