"""Keeps pytest out of tasks/.

The example projects under tasks/ hold deliberately failing tests (the
agents fix them inside sandboxes); a pytest run over the repository must
not collect them.
"""

collect_ignore_glob = ["*"]
