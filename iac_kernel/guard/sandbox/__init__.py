"""The bubblewrap sandbox of a bash call and how guarded programs start in it: the layout
and ``bwrap`` argv, what it hides, the launchers, the real programs and their start, and
the processes of a call. Imports nothing else of the guard."""
