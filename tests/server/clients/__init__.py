"""The client suite: `structgen serve` driven by the client libraries people use."""
