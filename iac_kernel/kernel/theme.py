"""Colours of the kernel's own HTML (the fallback cards, plan card, footer) for every theme.

That HTML is what frontends without the extension and nbconvert's HTML show, on a light
or a dark page, with or without JupyterLab's CSS variables. So it follows three rules:

* text keeps the page's own colour (never set beside a fixed light background); muted
  text is the same colour at lower opacity;
* backgrounds are translucent tints, so they darken a dark page and lighten a light one;
* accents (status words, borders) use JupyterLab's theme variables, with light-theme
  fallbacks where the variables are missing.
"""

from __future__ import annotations


def var(name: str, fallback: str) -> str:
    """``var(--jp-NAME, FALLBACK)``."""
    return f"var(--jp-{name}, {fallback})"


def tint(rgb: tuple[int, int, int], alpha: float = 0.15) -> str:
    """A translucent background of ``rgb``: readable under light and dark text alike."""
    return f"rgba({rgb[0]},{rgb[1]},{rgb[2]},{alpha})"


RED = var("error-color1", "#cf222e")
GREEN = var("success-color1", "#1a7f37")
ORANGE = var("warn-color1", "#bf8700")
BLUE = var("brand-color1", "#1f6feb")
#: A neutral accent (cancelled, unknown); a mid grey reads on white and on black.
GREY = var("content-font-color2", "#6e7781")
BORDER = var("border-color1", "rgba(128,128,128,.45)")
#: Muted text: the page's text colour, fainter (never a fixed grey on an unknown page).
MUTED = "opacity:.75"

#: Tints of the diff and plan rows (GitHub's hues, translucent).
RED_TINT = tint((248, 81, 73))
GREEN_TINT = tint((46, 160, 67))
ORANGE_TINT = tint((219, 109, 40))
YELLOW_TINT = tint((210, 153, 34))
BLUE_TINT = tint((56, 139, 253))
GREY_TINT = tint((128, 128, 128), 0.1)
