"""Tests of structgen.grammar: the front ends and the byte IR, with no vocabulary where they can."""
