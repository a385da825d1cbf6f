"""Models: one record per provider (providers.py; a new provider is a record there), the two
SDK kinds it names (anthropic.py, openai.py, sharing retry.py) and the offline scripted model."""
