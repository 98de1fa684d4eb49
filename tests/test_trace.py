"""Shape tracing: every module's shapes, and fc's fate under each wiring."""

import pytest
import torch

from conftest import DRAFTS
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.model import load_draft
from eagle3_nb.trace import trace_shapes
from eagle3_nb.model import Wiring


@pytest.fixture(scope="module")
def draft():
    return load_draft(DRAFTS / "good-speculators")


def test_trained_width_traces_clean(draft):
    ids = torch.randint(0, 512, (2, 7))
    trace = trace_shapes(draft, ids, torch.randn(2, 7, 192))
    assert trace.fc_applied and not trace.mismatches
    rows = {r.module: r for r in trace.rows}
    assert rows["fc"].inputs == [[2, 7, 192]] and rows["fc"].output == [2, 7, 64]
    assert rows["layers.0.self_attn.q_proj"].inputs == [[2, 7, 128]]  # [embeds, hidden]: 2H
    assert rows["lm_head"].output == [2, 7, 256]


def test_single_layer_state_skips_fc_under_the_engine_rule(draft):
    single = Wiring("single_layer", None, "final_norm", "engine")
    trace = trace_shapes(draft, torch.randint(0, 512, (1, 5)), torch.randn(1, 5, 64), single)
    assert not trace.fc_applied
    status = {r.module: r.status for r in trace.rows}
    assert status["fc"] == "skipped" and status["hidden_states (from the target)"] == "mismatch"
    assert "fc" not in [r.module for r in trace.rows if r.status == "ok"]


def test_wrong_width_with_fc_always_is_a_clear_error(draft):
    with pytest.raises(Eagle3NbError, match="fc takes 192"):
        trace_shapes(draft, torch.randint(0, 512, (1, 5)), torch.randn(1, 5, 128))


def test_hooks_are_removed(draft):
    trace_shapes(draft, torch.randint(0, 512, (1, 3)), torch.randn(1, 3, 192))
    assert all(not m._forward_hooks for m in draft.modules())
