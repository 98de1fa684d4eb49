"""The TTT trainer computes exactly what an engine computes when it drafts ahead."""

import torch

from conftest import DRAFTS
from eagle3_nb.model import DraftCache, load_draft
from eagle3_nb.model import ttt_logits


def test_ttt_step_j_equals_cached_drafting_j_ahead():
    torch.manual_seed(0)
    draft = load_draft(DRAFTS / "good-speculators")
    T1 = 9
    tokens = torch.randint(0, 512, (2, T1))
    feats = torch.randn(2, T1, 192)
    steps = ttt_logits(draft, tokens, feats, 3)
    for t in (0, 3, 5):
        cache = DraftCache()
        out = draft.run(tokens[:, 1:t + 2], feats[:, :t + 1], cache=cache)
        torch.testing.assert_close(steps[0][:, t], out.logits[:, -1], rtol=1e-5, atol=1e-5)
        feature = out.features[:, -1:]
        for j in (1, 2):
            pos = torch.full((2, 1), t + j)
            nxt = draft.run(tokens[:, t + 1 + j:t + 2 + j], feature, pos, cache, own_features=True)
            torch.testing.assert_close(steps[j][:, t], nxt.logits[:, -1], rtol=1e-5, atol=1e-5)
            feature = nxt.features
