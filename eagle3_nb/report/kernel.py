"""One kernel for every notebook of a report.

The notebooks run one after another in the same kernel process, so what they share is loaded
once: the imports (torch among them), the draft checkpoint (io.checkpoint.open_once), and the
process's session.Session, with the target model and the engine wirings planned from them.
Between two notebooks the kernel's namespace is cleared and its working directory set to the
next notebook's folder, so each notebook still sees only its own variables, as it does when
opened alone in Jupyter.

    with ReportKernel(kernel_name) as kernel:
        run_notebook(nb, out, params, kernel=kernel)   # for each notebook
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from eagle3_nb.defaults import PROGRESS_VARIABLE
from eagle3_nb.report.notebooks import KERNEL_ARGUMENTS, ReportError, resolve_kernel

# Run before each notebook: a fresh namespace (modules stay imported, and with them what the kit
# keeps per process) and the notebook's own folder as the working directory.
_PREPARE = ("get_ipython().run_line_magic('reset', '-f')\n"
            "import os as _eagle3nb_os\n"
            "_eagle3nb_os.chdir({cwd!r})\n"
            "del _eagle3nb_os\n")
START_TIMEOUT_S = 120
_ABANDONED: list = []   # clients of an interrupted run, kept until exit (abandon_clients)


class ReportKernel:
    """The kernel the report's notebooks share. Started for the first notebook (its progress
    bars off: none is saved as a dead widget), restarted when a notebook killed it, shut down on
    exit. A kernel that cannot start fails the notebook that asked, as a kernel of its own would."""

    def __init__(self, kernel_name: str | None = None):
        self.requested = kernel_name
        self.kernel_name: str | None = None
        self.km: Any = None
        self._folder: str | None = None
        self.starts = 0

    def __enter__(self) -> "ReportKernel":
        return self

    def __exit__(self, *exc) -> None:
        self._shutdown()

    def prepare(self, notebook_dir: Path) -> None:
        """A clean namespace in NOTEBOOK_DIR for the next notebook (a new kernel if it died)."""
        from jupyter_core.utils import run_sync

        if self.km is None or not run_sync(self.km.is_alive)():
            self._shutdown()
            self._start()
        client = self.km.client()
        client.start_channels()
        try:
            run_sync(client.wait_for_ready)(timeout=START_TIMEOUT_S)
            reply = run_sync(client.execute_interactive)(
                _PREPARE.format(cwd=str(notebook_dir)), silent=True, store_history=False,
                timeout=START_TIMEOUT_S)
        finally:
            client.stop_channels()
        if reply["content"].get("status") != "ok":
            raise ReportError(f"the report's kernel could not be prepared "
                              f"({reply['content'].get('ename')}: "
                              f"{reply['content'].get('evalue')})", str(notebook_dir),
                              "run the notebook alone with `eagle3-nb notebooks` to see why")

    def release_clients(self) -> None:
        """Stop the channels of the clients a notebook's run opened: papermill leaves them
        open on a kernel it does not own (and jupyter_client warns when they are collected)."""
        if self.km is not None:
            for client in self.km.clients:
                client.stop_channels()
            self.km.clients.clear()

    def abandon_clients(self) -> None:
        """After Ctrl-C or a signal (io.files.cleanup_on_signals) stopped a notebook mid-run:
        stopping the clients' channels then can block forever in zmq's Context.term, on a socket
        the interrupted coroutine still holds (seen: a report that outlived SIGHUP in
        KernelClient.stop_channels). The process is ending, so the clients are kept until it
        exits, where pyzmq does not destroy contexts, and never collected before."""
        if self.km is not None:
            _ABANDONED.extend(self.km.clients)
            self.km.clients.clear()

    def _start(self) -> None:
        from jupyter_core.utils import run_sync
        from traitlets.config import Config

        self.kernel_name = resolve_kernel(self.requested)
        config = Config()
        if os.name == "posix":  # private Unix sockets: notebooks.kernel_sockets says why
            self._folder = tempfile.mkdtemp(prefix="eagle3nb-kernel-")
            config = Config({"KernelManager": {"transport": "ipc",
                                               "ip": os.path.join(self._folder, "kernel")}})
        self.km = _manager_class()(kernel_name=self.kernel_name, config=config)
        env = {**os.environ, PROGRESS_VARIABLE: "off"}
        run_sync(self.km.start_kernel)(extra_arguments=KERNEL_ARGUMENTS, env=env)
        self.starts += 1

    def _shutdown(self) -> None:
        from jupyter_core.utils import run_sync

        if self.km is not None:
            try:
                run_sync(self.km.shutdown_kernel)(now=True)
            except RuntimeError:
                pass  # already gone
            self.km = None
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None


def _manager_class():
    from jupyter_client.manager import AsyncKernelManager

    class ClientsKept(AsyncKernelManager):
        """Keeps the clients it makes, for ReportKernel.release_clients."""

        def client(self, **kwargs):
            made = super().client(**kwargs)
            self.clients.append(made)
            return made

        @property
        def clients(self) -> list:
            return self.__dict__.setdefault("clients", [])

    return ClientsKept
