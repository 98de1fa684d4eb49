"""ipywidgets explorers: a thin layer over the pure renderers in `eagle3_nb.viz`.

Widgets need a live kernel; in a static HTML report they are dead. So every widget has a static
render of the selection it opens on (`engine_view_html`, `lookup_view_html`): notebooks display
that first and add the widget, on the same selection, only when `interactive` is true.
"""

from __future__ import annotations

from typing import Any
from eagle3_nb.viz.html import HTMLString, esc, note, show
from eagle3_nb.viz.keys import findings_html, key_table_html, verdict_html
from eagle3_nb.viz.vocab import lookup_html

RANK = {"ok": 0, "silent_failure": 1, "load_error": 2}


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


def first_engine(data: dict[str, Any]) -> str:
    """The selection the explorer opens on in the notebooks: the engine with the worst verdict
    (the first of equals, in the inspection's order), or "all" when no engine was checked."""
    engines = data.get("engines", [])
    if not engines:
        return "all"
    return max(engines, key=lambda e: RANK.get(e.get("verdict"), 0))["profile"]


def engine_view_html(data: dict[str, Any], engine: str) -> HTMLString:
    """The static render of `engine_explorer(data, engine)` as it opens: what the offline report
    shows in place of the widget."""
    if engine not in engine_choices(data):
        raise ValueError(f"engine {engine!r} is not one of {engine_choices(data)}")
    return show(_static_caption(f"engine {esc(engine)}", "pick another engine or hide the keys "
                                "every engine loads") + render_engine(data, engine))


def _static_caption(selection_markup: str, live: str) -> str:
    return note(f"<i>Static render of the widget below, opened on {selection_markup}</i> (what "
                f"the offline report shows); with a live kernel, {esc(live)}.")


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


def first_lookup(mapping) -> str:
    """The query the lookup opens on in the notebooks: the first suspicious draft id, else the
    first draft id with a nonzero offset (where the two readings of d2t differ), else d:0."""
    suspicious = list(mapping.suspicious_entries())
    if suspicious:
        return f"d:{int(suspicious[0])}"
    nonzero = mapping.d2t.nonzero()[0] if mapping.d2t is not None else []
    return f"d:{int(nonzero[0])}" if len(nonzero) else "d:0"


def lookup_view_html(mapping, query: str, tokenizer=None) -> HTMLString:
    """The static render of `vocab_lookup(mapping, tokenizer, query)` as it opens."""
    return show(_static_caption(f"<code>{esc(query)}</code>", "type another draft id, target "
                                "id or token") + lookup_html(mapping, query, tokenizer))


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
