"""Model providers: the Anthropic Messages API and the offline scripted model."""
