"""Part 7: how many HBM accesses standard and flash attention make.

The model (README.md, section "Part 7"): one head, sequence length n, head
dimension d, on-chip SRAM of m elements. Counts are numbers of ELEMENTS read
from or written to HBM (multiply by the element size for bytes). Return ints.
"""

from __future__ import annotations


def flash_block_sizes(d: int, m: int) -> tuple[int, int]:
    """(B_r, B_c) from Algorithm 1 of the FlashAttention paper."""
    raise NotImplementedError("flash_block_sizes: see README.md, section 'Part 7: io-analysis'")


def standard_attention_hbm_accesses(n: int, d: int) -> int:
    """Elements read + written by Algorithm 0 (standard attention)."""
    raise NotImplementedError("standard_attention_hbm_accesses: see README.md, section 'Part 7: io-analysis'")


def flash_attention_hbm_accesses(n: int, d: int, m: int) -> int:
    """Elements read + written by Algorithm 1 (FlashAttention forward)."""
    raise NotImplementedError("flash_attention_hbm_accesses: see README.md, section 'Part 7: io-analysis'")
