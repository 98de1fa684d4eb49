"""ipywidgets explorers: a thin layer over the pure renderers in `eagle3_nb.viz`.

Widgets need a live kernel; in a static HTML report they are a frozen snapshot. So nothing here
shows information the static renders do not: notebooks display those first and add a widget
only when `interactive` is true.
"""

from __future__ import annotations

from typing import Any
from eagle3_nb.viz.keys import findings_html, key_table_html, verdict_html
from eagle3_nb.viz.vocab import lookup_html


def engine_choices(data: dict[str, Any]) -> list[str]:
    """"all" and every NAME==VERSION profile of the inspection, in its order."""
    return ["all"] + [e["profile"] for e in data.get("engines", [])]


def render_engine(data: dict[str, Any], engine: str = "all", only_problems: bool = False) -> str:
    """What the explorer shows for one selection (pure: testable without widgets)."""
    if engine == "all":
        return verdict_html(data) + findings_html(data) + key_table_html(
            data, only_problems=only_problems)
    return findings_html(data, engine=engine) + key_table_html(
        data, engines=[engine], only_problems=only_problems)


def engine_explorer(data: dict[str, Any], engine: str = "all"):
    """A Dropdown of engines ("all" or one NAME==VERSION) and a checkbox to hide the keys every
    selected engine loads; re-renders findings and the key table for the selection."""
    import ipywidgets as w

    choices = engine_choices(data)
    if engine not in choices:
        raise ValueError(f"engine {engine!r} is not one of {choices}")
    pick = w.Dropdown(options=choices, value=engine, description="engine",
                      layout=w.Layout(width="280px"))
    problems = w.Checkbox(value=False, description="only keys with a problem", indent=False)
    view = w.HTML(value=render_engine(data, engine))

    def refresh(_change=None) -> None:
        view.value = render_engine(data, pick.value, problems.value)

    pick.observe(refresh, names="value")
    problems.observe(refresh, names="value")
    return w.VBox([w.HBox([pick, problems]), view])


LOOKUP_HINT = ('<div style="color:#656d76;font-size:12px">type a draft id (<code>d:12</code>), a '
               'target id (<code>t:1786</code>), a bare number (both) or a token string (needs a '
               'tokenizer; quote a token that is a number: <code>\'42\'</code>), then Enter</div>')


def vocab_lookup(mapping, tokenizer=None, query: str = ""):
    """A Text box and the answer below it: which target a draft id maps to and which draft id
    maps to a target id or token string, under each reading of d2t, and whether t2d keeps it.
    Re-renders `viz.vocab.lookup_html` on Enter."""
    import ipywidgets as w


    box = w.Text(value=query, placeholder="d:12, t:1786, 42 or a token string",
                 description="look up", continuous_update=False,
                 layout=w.Layout(width="420px"))
    view = w.HTML()

    def refresh(_change=None) -> None:
        q = box.value.strip()
        view.value = str(lookup_html(mapping, q, tokenizer)) if q else LOOKUP_HINT

    box.observe(refresh, names="value")
    refresh()
    return w.VBox([box, view])
