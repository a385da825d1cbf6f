"""The Jupyter kernel front end: cells are prompts to one agent session per kernel.

On top: ``kernel`` (the IPython-based kernel: cells, turns, requests served during a
turn), ``app`` (kernelspec, install, launch), ``completion`` (complete, inspect, history).
Below them, each importing only those after it: ``magics`` (cell parsing, the magic
table), ``session`` (the kernel's sessions and running turns, the status comm, editors on
the same session), ``ask`` (permission questions: buttons, forms, stdin, policy),
``render`` (a turn's output: text, tool and plan cards, footer), ``io`` (a cell's
channels, paths as shown).
"""
