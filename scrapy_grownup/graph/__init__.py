"""Step 2: node features and the model input graph.

Layout, repetition, page signals, Laplacian positions and batching by a node budget.
"""
