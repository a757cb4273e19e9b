"""structgen's OpenAI-compatible HTTP server (FastAPI). `server.app.create_app` builds it."""
