"""Session persistence (append-only JSONL store) and the registry of live sessions."""
