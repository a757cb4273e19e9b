"""The test suite, laid out like the code (tests/README.md)."""
