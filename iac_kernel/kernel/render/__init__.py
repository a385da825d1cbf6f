"""A turn's cell output: streamed text, tool cards, plan cards, checklist, footer."""
