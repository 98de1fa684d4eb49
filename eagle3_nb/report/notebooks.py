"""Headless runs: papermill executes a notebook, nbconvert renders it to self-contained HTML,
and each notebook leaves a summary.json next to them.

    run_notebook(notebooks_dir() / "01_checkpoint_keys.ipynb", Path("out"), {"checkpoint": "my/draft"})
    render_html(Path("out/01_checkpoint_keys.ipynb"), Path("out/01_checkpoint_keys.html"))

The whole report (every notebook, index.html, merged summary.json) is eagle3_nb.report.run.

The HTML works offline: plotly.js is embedded once by the notebooks' "notebook" plotly renderer;
the template's require.js, MathJax and mermaid loaders and plotly's per-figure MathJax
<script src> tags are dropped; widget state is left out (widgets are dead in static HTML and
every notebook shows static renders first). papermill, nbconvert and jupyter_client are imported
lazily.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

from eagle3_nb.defaults import PROGRESS_VARIABLE
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.io.files import atomic_write_text, json_text
from eagle3_nb.io.resources import notebooks_dir, samples_dir
from eagle3_nb.findings import SUMMARY_KINDS, part_kind

# resolved against the caller's cwd
PATH_PARAMETERS = ("checkpoint", "target_config", "output_dir", "tokenizer", "corpus", "target",
                   "prompts", "hidden_states", "compare_to", "train_data", "chat_template",
                   "target_model", "train_hidden_states")
KIT_KERNEL = "eagle3-nb"  # the kernel `make setup` registers and every notebook declares
SAMPLES_DEFAULT = "../data_samples/"  # how notebook defaults name the bundled samples
SUMMARY_NAME = "summary.json"
# The kernel's own log would interleave with the report's progress lines: ipykernel's warning
# about its local TCP transport, once per notebook, and at ERROR "KeyboardInterrupt caught in
# kernel." when the SIGINT that jupyter_client sends before every shutdown request
# (KernelManager.shutdown_kernel) lands while the kernel idles. Cell errors still come through
# the notebook itself.
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=CRITICAL"]

# Every <script src="http(s)://..."></script> that survives in a report would be fetched from the
# network (and fail offline): plotly's per-figure MathJax loader, mostly.
_REMOTE_SCRIPT = re.compile(r"""<script\b[^>]*\bsrc\s*=\s*["']https?://[^"']*["'][^>]*>\s*</script>""",
                            re.IGNORECASE)
_OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""


class ReportError(Eagle3NbError):
    """A notebook run or render that failed; the message names the notebook and the cell.
    A failed cell also sets `cell` (its execution count), `ename` and `evalue`."""

    cell: int | None = None
    ename: str | None = None
    evalue: str | None = None


# ----------------------------------------------------------------------------- parameters

def sample_default(path: str) -> str:
    """A notebook default such as "../data_samples/drafts/good" names a bundled sample as seen
    from the notebooks' folder, where Jupyter and `run_notebook` start the kernel. From any other
    working directory (papermill run elsewhere, a copy of the notebook, a pip install) it still
    names that sample. Every other path, and one that exists from here, is returned as given."""
    if not str(path).startswith(SAMPLES_DEFAULT) or Path(path).exists():
        return path
    return str(samples_dir() / str(path)[len(SAMPLES_DEFAULT):])


# ----------------------------------------------------------------------------- kernel

def resolve_kernel(kernel_name: str | None = None) -> str:
    """The kernel to run notebooks in: this Python environment's.

    An explicit name other than the kit's (`eagle3-nb`, the name every notebook declares) or
    "python3" is used as given. Otherwise the kit's kernel, when it is installed and runs this
    interpreter (`make setup` registers it); else the native kernel, "python3", which is this
    interpreter, e.g. after a pip install beside an engine that registered no kernel. A python3
    kernelspec installed for another interpreter would shadow the native one (jupyter_client
    prefers it), so it is only taken when it runs this interpreter too."""
    if kernel_name not in (None, KIT_KERNEL, "python3"):
        return kernel_name
    try:
        from jupyter_client.kernelspec import KernelSpecManager
        ksm = KernelSpecManager()
        specs = ksm.find_kernel_specs()
        for name in (KIT_KERNEL, "python3"):
            if name == "python3" and name not in specs:
                return "python3"  # the native kernel: this interpreter
            if name in specs and _runs_this_python(ksm.get_kernel_spec(name).argv):
                return name
    except Exception:  # noqa: BLE001 - no jupyter_client: let papermill report it
        pass
    return "python3"


def _runs_this_python(argv: list[str]) -> bool:
    if not argv:
        return False
    exe = argv[0]
    if exe in ("python", "python3", f"python{sys.version_info[0]}.{sys.version_info[1]}"):
        return True  # jupyter_client rewrites these to sys.executable
    return Path(exe).parent.absolute() == Path(sys.executable).parent.absolute()


# ----------------------------------------------------------------------------- running

def run_notebook(notebook: Path, out_dir: Path, parameters: dict[str, Any] | None = None,
                 kernel_name: str | None = None, timeout_s: int | None = 600,
                 kernel=None) -> Path:
    """Execute `notebook` with papermill into `out_dir/<notebook name>` and return that path.
    KERNEL: a report.kernel.ReportKernel to run in (the report's notebooks share one); without
    it the notebook gets a kernel of its own.

    The kernel's cwd is the notebook's folder (the defaults there are relative to it); path
    parameters (checkpoint, target_config, output_dir) given relative are resolved against the
    caller's cwd first. `output_dir` defaults to `out_dir` when the notebook declares it, so its
    summary.json lands next to the executed notebook."""
    notebook, out_dir = Path(notebook).resolve(), Path(out_dir).resolve()
    if not notebook.is_file():
        raise ReportError("notebook not found", str(notebook), f"notebooks live in {notebooks_dir()}")
    out_dir.mkdir(parents=True, exist_ok=True)
    params = dict(parameters or {})
    declared = notebook_parameters(notebook)
    if "output_dir" in declared:
        params.setdefault("output_dir", str(out_dir))
    for key in PATH_PARAMETERS:
        value = params.get(key)
        if isinstance(value, (str, os.PathLike)) and str(value) and not Path(value).is_absolute():
            params[key] = str(Path(value).resolve())
        elif isinstance(value, os.PathLike):
            params[key] = str(value)
    unknown = sorted(set(params) - set(declared))
    if unknown:
        raise ReportError(f"unknown parameter(s) {unknown}", notebook.name,
                          f"the notebook declares {sorted(declared)}")
    output = out_dir / notebook.name
    saved = os.environ.get(PROGRESS_VARIABLE)
    os.environ[PROGRESS_VARIABLE] = "off"  # the kernel inherits it: no bar saved as a dead widget
    try:
        _execute(notebook, output, params, kernel_name, timeout_s, kernel)
    finally:
        if saved is None:
            os.environ.pop(PROGRESS_VARIABLE, None)
        else:
            os.environ[PROGRESS_VARIABLE] = saved
    return output


def _execute(notebook: Path, output: Path, params: dict[str, Any], kernel_name: str | None,
             timeout_s: int | None, kernel=None) -> None:
    import papermill as pm

    common = {"parameters": params, "progress_bar": False, "log_output": False,
              "execution_timeout": timeout_s}
    try:
        if kernel is not None:
            kernel.prepare(notebook.parent)
            try:
                pm.execute_notebook(notebook, output, kernel_name=kernel.kernel_name,
                                    km=kernel.km, **common)
            except Exception:
                kernel.release_clients()
                raise
            except BaseException:   # interrupted: see ReportKernel.abandon_clients
                kernel.abandon_clients()
                raise
            kernel.release_clients()
            return
        with kernel_sockets() as sockets:
            pm.execute_notebook(notebook, output, kernel_name=resolve_kernel(kernel_name),
                                cwd=str(notebook.parent), extra_arguments=KERNEL_ARGUMENTS,
                                **common, **sockets)
    except pm.PapermillExecutionError as exc:
        err = ReportError(f"cell {exc.exec_count} raised {exc.ename}: {exc.evalue}",
                          notebook.name, f"the partly executed notebook is {output}")
        err.cell, err.ename, err.evalue = exc.exec_count, exc.ename, exc.evalue
        raise err from None


@contextlib.contextmanager
def kernel_sockets() -> Iterator[dict[str, Any]]:
    """papermill's arguments that give the kernel Unix sockets in a private folder (removed
    after), where the OS has them. Over TCP, jupyter_client picks free ports, frees them, and the
    kernel binds them a moment later: a socket that any process opens in between can take one,
    and the kernel then dies or loses a channel with a "ZMQError: Address already in use"
    traceback in the middle of the report. Unix sockets have no such race (nor a port open to
    the machine's other users)."""
    if os.name != "posix":
        yield {}
        return
    from traitlets.config import Config

    folder = tempfile.mkdtemp(prefix="eagle3nb-kernel-")
    try:
        yield {"config": Config({"KernelManager": {"transport": "ipc",
                                                   "ip": os.path.join(folder, "kernel")}})}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def notebook_parameters(notebook: Path) -> dict[str, dict[str, Any]]:
    """papermill's view of the `parameters` cell: name -> {inferred_type_name, default, help}.
    Read once per notebook file version (one report asks several times per notebook)."""
    path = Path(notebook).resolve()
    stat = path.stat() if path.is_file() else None
    key = (str(path), stat.st_mtime_ns if stat else None, stat.st_size if stat else None)
    return {name: dict(p) for name, p in _parameters_of(key).items()}


@functools.lru_cache(maxsize=64)
def _parameters_of(key: tuple) -> dict[str, dict[str, Any]]:
    import papermill as pm

    return dict(pm.inspect_notebook(key[0]))


# ----------------------------------------------------------------------------- HTML

def render_html(executed_ipynb: Path, html_path: Path) -> Path:
    """nbconvert's lab template, without prompts, widget state or any remote <script src>."""
    import jinja2
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(str(executed_ipynb), as_version=4)
    nb.metadata.pop("widgets", None)  # dead without a kernel; the static renders carry the content
    _replace_widget_views(nb)
    exporter = HTMLExporter(template_name="lab", exclude_input_prompt=True,
                            exclude_output_prompt=True,
                            extra_loaders=[jinja2.DictLoader({"eagle3_offline.html.j2":
                                                              _OFFLINE_TEMPLATE})])
    exporter.template_file = "eagle3_offline.html.j2"
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {
        "name": Path(executed_ipynb).stem}})
    body = _REMOTE_SCRIPT.sub("", body)
    html_path = Path(html_path)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(html_path, body)
    return html_path


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = ('<div style="color:#656d76;font-style:italic;font-size:12px">interactive widget: '
               'needs a live kernel (open the notebook in Jupyter); the static views above show '
               'the same information</div>')


def _replace_widget_views(nb) -> None:
    """A widget's output in a static page is its text repr ("VBox(children=..."): say instead
    that it needs a kernel."""
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if WIDGET_VIEW in out.get("data", {}):
                out["data"] = {"text/html": WIDGET_NOTE}


# ----------------------------------------------------------------------------- summary.json

def write_summary(output_dir: str | Path, notebook: str, part: dict[str, Any],
                  **extra: Any) -> Path:
    """Write `output_dir/summary.json`: PART, a check's summary that declares its kind
    (findings.summary_part), under NOTEBOOK's name; `extra` entries (e.g. notebook 01's `diff`
    against a known-good draft) are added as given."""
    if part_kind(part) is None:
        raise ValueError(f"{notebook}: a summary.json part must declare one of {SUMMARY_KINDS} "
                         "(build it with its check's summary function)")
    summary = {**part, "notebook": notebook, **extra}
    path = Path(output_dir) / SUMMARY_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json_text(summary) + "\n")
    return path
