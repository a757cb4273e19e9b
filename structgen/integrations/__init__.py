"""structgen's grammars inside other libraries' decoding loops (transformers' `generate`)."""
