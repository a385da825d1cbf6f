"""The WCAG contrast ratio of an element's text against what it is drawn on, as the
browser computes it: the backgrounds of the element and its ancestors blended (translucent
tints included), the text's own alpha and every ancestor's opacity applied.

``node.evaluate(CONTRAST)`` in Playwright gives the ratio (1 to 21), or null when the node
left the page before it was read (a virtual list re-draws its rows on a theme switch):
:func:`contrast` asks again then.
"""

#: WCAG AA for normal text.
MINIMUM = 4.5

CONTRAST = """node => {
  const parse = value => {
    let m = value.match(/rgba?\\(([^)]+)\\)/);
    if (m) {
      const p = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
      return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
    }
    m = value.match(/color\\(srgb ([^)]+)\\)/);
    if (m) {
      const p = m[1].split(/[ /]+/).filter(Boolean).map(Number);
      return [p[0] * 255, p[1] * 255, p[2] * 255, p.length > 3 ? p[3] : 1];
    }
    return null;
  };
  const chain = [];
  for (let n = node; n; n = n.parentElement) chain.unshift(n);
  let bg = [255, 255, 255];
  for (const n of chain) {
    const c = parse(getComputedStyle(n).backgroundColor);
    if (c && c[3] > 0) bg = [0, 1, 2].map(i => c[i] * c[3] + bg[i] * (1 - c[3]));
  }
  // Muted text is drawn at a lower opacity: the text's alpha is multiplied by it.
  const opacity = chain.reduce((o, n) => o * Number(getComputedStyle(n).opacity || 1), 1);
  const f = parse(getComputedStyle(node).color);
  if (!node.isConnected || !f) return null;  // re-drawn meanwhile (a virtual row): ask again
  const a = f[3] * opacity;
  const fg = [0, 1, 2].map(i => f[i] * a + bg[i] * (1 - a));
  const lum = c => {
    const [r, g, b] = c.map(v => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
  return (hi + 0.05) / (lo + 0.05);
}"""


def contrast(locator) -> float:
    """The WCAG contrast ratio of the first element's text on what it is drawn on (asked
    again while the element is being re-drawn)."""
    for _ in range(50):
        ratio = locator.first.evaluate(CONTRAST)
        if ratio is not None:
            return float(ratio)
        locator.page.wait_for_timeout(100)
    raise AssertionError(f"{locator} never stayed on the page long enough to be read")
