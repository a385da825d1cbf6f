"""Helpers for the headless-Chromium tests of the JupyterLab extension."""
