"""A cell's channels (IOPub, stdin) and paths as the notebook shows them."""
