"""TensorRT-LLM releases from its first with EAGLE-3 on the PyTorch backend, oldest first, with
their dates (PyPI upload times, from the release notes,
NVIDIA/TensorRT-LLM/docs/source/release-notes.md, and PyPI; docs/engine-facts-trtllm.md).

0.19.0 is the first release whose notes say "Added initial EAGLE-3 implementation" (PR #3035);
releases up to 0.18.x had only the TensorRT-engine EAGLE-1/2. The 1.3 line was published as
release candidates only (1.3.0rc0 .. 1.3.0rc29, no 1.3.0 final) and 1.4 so far as 1.4.0rc0 and
1.4.0rc1. Only the candidates whose date was recorded are listed: 1.3.0rc0 (the line's start)
and 1.3.0rc29 (its end). Any other candidate is answered from the nearest listed release with a
warning that its code was not surveyed (engines.resolve_engine)."""

RELEASES: tuple[tuple[str, str], ...] = (
    ("0.19.0", "2025-05-09"), ("0.20.0", "2025-06-19"), ("0.21.0", "2025-08-04"),
    ("1.0.0", "2025-09-24"), ("1.1.0", "2025-12-19"), ("1.2.0", "2026-03-12"),
    ("1.2.1", "2026-04-20"), ("1.3.0rc0", "2026-01-22"), ("1.3.0rc29", "2026-09-29"),
    ("1.4.0rc0", "2026-10-13"), ("1.4.0rc1", "2026-10-21"),
)
