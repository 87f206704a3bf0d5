# BEGIN SOLUTION
"""Part 7: how many HBM accesses standard and flash attention make.

The model (README.md, section "Part 7"): one head, sequence length n, head
dimension d, on-chip SRAM of m elements. Counts are numbers of ELEMENTS read
from or written to HBM (multiply by the element size for bytes).
"""
# STARTER
# """Part 7: how many HBM accesses standard and flash attention make.
#
# The model (README.md, section "Part 7"): one head, sequence length n, head
# dimension d, on-chip SRAM of m elements. Counts are numbers of ELEMENTS read
# from or written to HBM (multiply by the element size for bytes). Return ints.
# """
# END SOLUTION

from __future__ import annotations


# BEGIN SOLUTION
def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# END SOLUTION
def flash_block_sizes(d: int, m: int) -> tuple[int, int]:
    # BEGIN SOLUTION
    """(B_r, B_c) from Algorithm 1 of the FlashAttention paper:
    B_c = ceil(m / 4d) (K_j, V_j, Q_i, O_i must fit in SRAM together), B_r = min(B_c, d)."""
    b_c = _ceil_div(m, 4 * d)
    return min(b_c, d), b_c
    # STARTER
    # """(B_r, B_c) from Algorithm 1 of the FlashAttention paper."""
    # raise NotImplementedError("flash_block_sizes: see README.md, section 'Part 7: io-analysis'")
    # END SOLUTION


def standard_attention_hbm_accesses(n: int, d: int) -> int:
    # BEGIN SOLUTION
    """Algorithm 0: read Q, K (2nd), write S (n^2); read S, write P (2n^2);
    read P (n^2) and V (nd), write O (nd). Total 4nd + 4n^2 = Theta(nd + n^2)."""
    return 4 * n * d + 4 * n * n
    # STARTER
    # """Elements read + written by Algorithm 0 (standard attention)."""
    # raise NotImplementedError("standard_attention_hbm_accesses: see README.md, section 'Part 7: io-analysis'")
    # END SOLUTION


def flash_attention_hbm_accesses(n: int, d: int, m: int) -> int:
    # BEGIN SOLUTION
    """Algorithm 1 (lines 6, 8, 12, 13): K and V are read once (2nd). For each of the
    T_c = ceil(n / B_c) K/V blocks, every Q_i, O_i, l_i, m_i is read (2nd + 2n) and
    O_i, l_i, m_i are written (nd + 2n). Total 2nd + T_c (3nd + 4n) = Theta(n^2 d^2 / m)."""
    _, b_c = flash_block_sizes(d, m)
    t_c = _ceil_div(n, b_c)
    return 2 * n * d + t_c * (3 * n * d + 4 * n)
    # STARTER
    # """Elements read + written by Algorithm 1 (FlashAttention forward)."""
    # raise NotImplementedError("flash_attention_hbm_accesses: see README.md, section 'Part 7: io-analysis'")
    # END SOLUTION
