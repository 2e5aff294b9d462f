"""Step 4: from node scores to kept blocks, page type and block roles (refine, rescorer, classifiers)."""
