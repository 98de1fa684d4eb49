import json
import struct
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "data_samples"
DRAFTS = SAMPLES / "drafts"
TARGET_CONFIG = SAMPLES / "target" / "config.json"
# the releases the bundled samples' manifest states expectations for
SAMPLE_ENGINES = json.loads((DRAFTS / "manifest.json").read_text(encoding="utf-8"))["engines"]


def write_raw_safetensors(path: Path, header: dict, data: bytes, header_len: int | None = None):
    """Write a safetensors file byte by byte, so tests can build broken ones."""
    raw = json.dumps(header).encode()
    n = len(raw) if header_len is None else header_len
    path.write_bytes(struct.pack("<Q", n) + raw + data)


def write_draft_dir(root: Path, tensors: dict | None = None, config: dict | None = None) -> Path:
    """A minimal valid flat draft: config.json plus a one-tensor model.safetensors."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(config or {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 8,
        "num_attention_heads": 2, "intermediate_size": 16, "vocab_size": 32,
        "draft_vocab_size": 32, "num_hidden_layers": 1}))
    header = tensors or {"fc.weight": {"dtype": "F32", "shape": [8, 24], "data_offsets": [0, 768]}}
    size = max(t["data_offsets"][1] for t in header.values())
    write_raw_safetensors(root / "model.safetensors", header, bytes(size))
    return root


@pytest.fixture
def run_cli():
    """Run `eagle3-nb` in a subprocess: (returncode, stdout, stderr)."""
    import subprocess

    def run(*args, cwd=None):
        proc = subprocess.run([sys.executable, "-m", "eagle3_nb.cli", *map(str, args)],
                              capture_output=True, text=True, cwd=cwd)
        return proc.returncode, proc.stdout, proc.stderr
    return run


class _TableRows(HTMLParser):
    """Table rows of an HTML string: [[(text, title, style) per cell], ...], entities decoded."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.rows, self._row, self._cell = [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = ["", dict(attrs).get("title", ""), dict(attrs).get("style", "")]
        elif tag == "br" and self._cell is not None:
            self._cell[0] += "\n"

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append(tuple(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[0] += data


def table_rows(html: str) -> list[list[tuple[str, str, str]]]:
    parser = _TableRows()
    parser.feed(html)
    return parser.rows


def write_dumps(directory: Path, layers=(2, 4, 5, 8), n: int = 4, target=None) -> Path:
    """Speculators hs_*.safetensors dumps of the bundled target's held-out prompts, as vLLM's
    extract_hidden_states writes them (default capture [2, L//2, L-3, L], the last is L)."""
    import torch
    from safetensors.torch import save_file

    from eagle3_nb.session import read_prompts
    from eagle3_nb.target import TargetModel

    target = target or TargetModel.load(SAMPLES / "target")
    directory.mkdir(parents=True, exist_ok=True)
    for i, prompt in enumerate(read_prompts(SAMPLES / "prompts.jsonl", target, n)):
        out = target.forward_hidden(prompt)
        states = torch.stack([out.state(k, final="pre_norm") for k in layers], 1)
        save_file({"hidden_states": states.contiguous(), "token_ids": prompt.contiguous()},
                  str(directory / f"hs_{i}.safetensors"))
    return directory


class TouchOnUnpickle:
    """A pickle that creates PATH when it is loaded: proof that a reader never unpickled it."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def names_a_model_type(path) -> bool:
    """Whether PATH writes a model type transformers' AutoConfig (up to 5.1) would take for a
    config without model_type: tests of that guess skip on a machine whose temp dir does."""
    from eagle3_nb.engines.config_rules import guessed_type
    from eagle3_nb.engines.sglang.profiles import PATH_GUESSED_MODEL_TYPE

    return guessed_type(str(path), PATH_GUESSED_MODEL_TYPE[0].path_words) is not None
