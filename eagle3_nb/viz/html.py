"""Shared helpers for the kit's HTML renderers: inline styles only, no CSS classes, no scripts,
no network. Every string that comes from a checkpoint goes through `esc` (checkpoints are
untrusted input: a tensor may be called `<script>...`).

Renderers return an `HTMLString`: a plain `str` (testable, writable to a file) that Jupyter
displays as HTML when it is the value of a cell. `show(html, display=True)` also pushes it to
the notebook output (inseq style), so the same function serves notebooks, tests and reports.
"""

from __future__ import annotations

import html as _html
from typing import Any, Iterable, Sequence

from eagle3_nb.findings import evidence_line

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"
MONO = "ui-monospace, SFMono-Regular, Menlo, Consolas, 'Liberation Mono', monospace"
TEXT = "#1f2328"
MUTED = "#656d76"
BORDER = "#d0d7de"
HEAD_BG = "#f6f8fa"

# (foreground, background) pairs; readable on the white panel in light and dark Jupyter themes
RED = ("#b42318", "#fef3f2")
AMBER = ("#b54708", "#fffaeb")
GREEN = ("#067647", "#ecfdf3")
BLUE = ("#175cd3", "#eff8ff")
GREY = ("#475467", "#f2f4f7")
SOLID_RED = ("#ffffff", "#b42318")
SOLID_DARK_RED = ("#ffffff", "#7a271a")
SOLID_GREEN = ("#ffffff", "#067647")

SEVERITY_COLORS = {"error": RED, "warning": AMBER, "info": BLUE}


class HTMLString(str):
    """A str that Jupyter renders as HTML when it is a cell's value."""

    def _repr_html_(self) -> str:
        return str(self)

    def _repr_pretty_(self, p, cycle) -> None:  # keeps the notebook's text/plain copy short
        p.text(f"<HTML: {len(self)} characters>")


def esc(value: Any) -> str:
    """Escape anything for HTML text and attribute values (quotes included)."""
    return _html.escape("" if value is None else str(value), quote=True)


def show(html: str, display: bool = False) -> HTMLString:
    out = HTMLString(html)
    if display:
        from IPython.display import HTML, display as ipy_display
        ipy_display(HTML(str(out)))
    return out


def style(**props: Any) -> str:
    """style(font_size="12px") -> 'font-size:12px' (None values dropped)."""
    return ";".join(f"{k.replace('_', '-')}:{v}" for k, v in props.items() if v is not None)


def panel(title: str, body: str, subtitle: str = "") -> str:
    """The outer box every renderer returns: white, bordered, scrolls sideways when wide.
    `title` and `subtitle` are trusted markup (escape what goes into them)."""
    head = f'<div style="{style(font_size="15px", font_weight="600", margin="0 0 4px 0")}">{title}</div>'
    sub = (f'<div style="{style(color=MUTED, margin="0 0 8px 0")}">{subtitle}</div>'
           if subtitle else "")
    box = style(font_family=FONT, font_size="13px", line_height="1.45", color=TEXT,
                background="#ffffff", border=f"1px solid {BORDER}", border_radius="6px",
                padding="10px 12px", margin="6px 0", overflow_x="auto", max_width="100%",
                text_align="left")
    return f'<div style="{box}">{head}{sub}{body}</div>'


def badge(text: str, colors: tuple[str, str], title: str = "", bold: bool = True) -> str:
    """A coloured pill. `text` and `title` are escaped here."""
    fg, bg = colors
    css = style(display="inline-block", padding="1px 7px", border_radius="10px", color=fg,
                background=bg, border=f"1px solid {fg}33", font_size="12px",
                font_weight="600" if bold else "400", white_space="nowrap")
    t = f' title="{esc(title)}"' if title else ""
    return f'<span style="{css}"{t}>{esc(text)}</span>'


def code(text: Any) -> str:
    """Monospace, escaped (tensor names, parameter names, shapes)."""
    css = style(font_family=MONO, font_size="12px", background="transparent", color="inherit",
                padding="0")
    return f'<code style="{css}">{esc(text)}</code>'


def muted(text: str) -> str:
    return f'<span style="{style(color=MUTED)}">{esc(text)}</span>'


def cell(content: str, *, header: bool = False, colors: tuple[str, str] | None = None,
         title: str = "", align: str = "left", nowrap: bool = False, extra: str = "") -> str:
    """One table cell; `content` is trusted markup, `title` is escaped."""
    tag = "th" if header else "td"
    css = style(text_align=align, vertical_align="top", padding="3px 8px",
                border_bottom=f"1px solid {BORDER}",
                background=(colors[1] if colors else (HEAD_BG if header else None)),
                color=(colors[0] if colors else None),
                font_weight="600" if header else None,
                white_space="nowrap" if nowrap else None)
    if extra:
        css += ";" + extra
    t = f' title="{esc(title)}"' if title else ""
    return f'<{tag} style="{css}"{t}>{content}</{tag}>'


def table(headers: Sequence[str] | None,
          rows: Iterable[Sequence[str] | tuple[Sequence[str], str | None]],
          header_titles: Sequence[str] | None = None) -> str:
    """headers: trusted markup (None: no header row). rows: lists of ready-made <td> strings
    (see `cell`), or (cells, row_background) pairs to tint a whole row."""
    titles = list(header_titles or [""] * len(headers or []))
    head = "".join(cell(h, header=True, title=t, nowrap=True) for h, t in zip(headers or [], titles))
    body = []
    for row in rows:
        if isinstance(row, tuple) and len(row) == 2 and not isinstance(row[0], str):
            cells, bg = row
        else:
            cells, bg = row, None
        tr = f' style="{style(background=bg)}"' if bg else ""
        body.append(f"<tr{tr}>{''.join(cells)}</tr>")
    css = style(border_collapse="collapse", margin="4px 0", font_size="12.5px", width="auto")
    thead = f"<thead><tr>{head}</tr></thead>" if headers else ""
    return f'<table style="{css}">{thead}<tbody>{"".join(body)}</tbody></table>'


def note(text_markup: str) -> str:
    return f'<div style="{style(color=MUTED, font_size="12px", margin="6px 0 0 0")}">{text_markup}</div>'


def evidence_note(had: dict[str, str] | None) -> str:
    """The answer's one evidence line (findings.evidence_line) as a note, "" when none."""
    line = evidence_line(had)
    return note(esc(line)) if line else ""


def fmt_num(x: Any, digits: int = 4) -> str:
    """Compact numbers for tables: 4 significant digits, ints as ints, None as an en dash."""
    if x is None:
        return "–"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}" if abs(x) >= 10000 else str(x)
    if isinstance(x, float):
        if x != x:
            return "NaN"
        return f"{x:.{digits}g}"
    return esc(x)


def fmt_shape(shape: Any) -> str:
    if shape is None:
        return "–"
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def versus_html(vs: dict | None, digits: int = 2) -> str:
    """A paired difference against a baseline ({"difference", "se", "verdict"}, from
    uncertainty.verdict): "indistinguishable (+0.01 ± 0.02)", muted, or "lower (-0.40 ± 0.05)"."""
    if not vs or vs.get("difference") is None:
        return ""
    text = f"{vs['difference']:+.{digits}f}"
    if vs.get("se") is not None:
        text += f" ± {vs['se']:.{digits}f}"
    if vs.get("verdict") == "same":
        return muted("same as trained")
    if vs.get("verdict") == "indistinguishable":
        return muted(esc(f"indistinguishable ({text})"))
    return esc(f"{vs.get('verdict')} ({text})")

