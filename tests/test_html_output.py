"""Fallback HTML of a tool's output (nbconvert, frontends without the extension): monospace
blocks, Markdown tables (the plan tool's summary) as tables, everything escaped."""

from __future__ import annotations

from iac_kernel.kernel.render.cards import ToolCard, output_html

PLAN_TEXT = (
    "Plan: 1 to add, 0 to change, 1 to destroy.\n\n"
    "| action | address | why |\n|---|---|---|\n"
    "| + create | aws_s3_bucket.logs | <new> |\n| - delete | a.b | removed |\n\n"
    "Saved plan: tfplan"
)


def test_a_markdown_table_becomes_a_table_and_text_stays_monospace() -> None:
    out = output_html(PLAN_TEXT)
    assert "|---|" not in out and "| action |" not in out
    assert "<th>action</th><th>address</th><th>why</th>" in out
    assert "<td>+ create</td><td>aws_s3_bucket.logs</td><td>&lt;new&gt;</td>" in out
    assert out.count("<tr>") == 3
    assert out.count("<pre ") == 2 and "monospace" in out
    assert out.index("Plan: 1 to add") < out.index("<table") < out.index("Saved plan")


def test_pipes_without_a_separator_line_stay_text() -> None:
    text = "a | b\n| not | a table |\nx"
    out = output_html(text)
    assert "<table" not in out
    assert "| not | a table |" in out


def test_markup_in_cells_and_text_is_escaped() -> None:
    out = output_html("<script>x</script>\n| h |\n|---|\n| <img src=x onerror=y> |")
    assert "<script>" not in out and "<img" not in out
    assert "&lt;img src=x onerror=y&gt;" in out


def test_card_fallback_renders_the_plan_table() -> None:
    card = ToolCard("c1", "terraform_plan", "terraform_plan", "execute", "s1")
    card.status = "done"
    card.output = PLAN_TEXT
    html = card.bundle()["text/html"]
    assert "<th>address</th>" in html and "|---|" not in html
    assert "font-family:var(--jp-code-font-family,monospace)" in html
