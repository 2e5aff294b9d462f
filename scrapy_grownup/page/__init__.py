"""Step 1 of serving: HTML bytes to ``PageStructure``, the DOM as arrays.

Decoding, parsing, visibility, fonts and the per-page caps.
"""
