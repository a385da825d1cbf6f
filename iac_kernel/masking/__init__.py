"""Masking of secrets by value (every encoding a value prints in) and by shape (keys,
tokens and passwords recognisable without knowing them). Below every other layer: tools,
terraform, sessions and fronts all mask through here."""
