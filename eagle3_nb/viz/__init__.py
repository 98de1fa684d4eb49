"""Pure renderers: data (plain dicts, as the JSON outputs) in; text, HTML or plotly figures out.
Submodules import plotly lazily so the CLI's text path stays light."""
