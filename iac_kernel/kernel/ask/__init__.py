"""Permission questions in the notebook: their words, buttons, forms, stdin, policy."""
