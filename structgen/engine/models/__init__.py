"""Model definitions (Llama family) and the loaders that fill them with weights."""
