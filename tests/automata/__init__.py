"""Tests of structgen.automata: the compiled automaton, covering examples, counted strings."""
