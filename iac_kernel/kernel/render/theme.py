"""Colours of the kernel's own HTML (the fallback cards, plan card, footer) for every theme.

That HTML is what frontends without the extension and nbconvert's HTML show, on a light
or a dark page, with or without JupyterLab's CSS variables. So it follows three rules:

* text keeps the page's own colour (never set beside a fixed light background); muted
  text is the same colour at lower opacity;
* backgrounds are translucent tints, so they darken a dark page and lighten a light one;
* accents (status words, borders) use JupyterLab's theme variables; where they are
  missing, the accent's hue mixed with the page's text colour (:func:`accent`).
"""

from __future__ import annotations


def var(name: str, fallback: str) -> str:
    """``var(--jp-NAME, FALLBACK)``."""
    return f"var(--jp-{name}, {fallback})"


def tint(rgb: tuple[int, int, int], alpha: float = 0.15) -> str:
    """A translucent background of ``rgb``: readable under light and dark text alike."""
    return f"rgba({rgb[0]},{rgb[1]},{rgb[2]},{alpha})"


#: How much of the accent's hue an accent text keeps (the rest is the text's colour).
ACCENT_SHARE = 45


def accent(name: str, hue: str) -> str:
    """JupyterLab's accent ``name`` (``hue`` without JupyterLab's variables) mixed with the
    page's own text colour: darker on a light page, lighter on a dark one, so status words
    keep 4.5:1 on either, tints included (JupyterLab's own accents alone do not: green on
    white, orange and red on their tints). A browser without ``color-mix`` shows the text
    colour."""
    return f"color-mix(in srgb, {var(name, hue)} {ACCENT_SHARE}%, currentColor)"


RED = accent("error-color1", "#cf222e")
GREEN = accent("success-color1", "#1a7f37")
ORANGE = accent("warn-color1", "#bf8700")
BLUE = accent("brand-color1", "#1f6feb")
#: A neutral accent (cancelled, unknown).
GREY = accent("content-font-color2", "#6e7781")
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
