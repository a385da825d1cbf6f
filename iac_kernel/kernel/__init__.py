"""The Jupyter kernel front end: cells are prompts to one agent session per kernel.

Modules: ``kernel`` (the IPython-based kernel), ``app`` (launch), ``install`` (kernelspec),
``publish`` (IOPub sends pinned to one request), ``display`` (the streamed answer),
``cards`` (tool-call cards), ``permission_ui`` (buttons, policy, stdin), ``magics``,
``completion`` (complete, is_complete, inspect), ``state`` (the kernel's sessions),
``turn`` (agent events to cell output), ``session_info`` (status-bar metadata),
``testing`` (a jupyter_client harness for tests).
"""
