"""Rebuild every table and figure of the paper from the records under results/: `python -m paper.rebuild`."""
