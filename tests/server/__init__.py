"""Tests of server/: the OpenAI-compatible app in-process and as the real `structgen serve`."""
