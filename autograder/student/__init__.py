"""What a student runs besides the notebooks: `progress` (every notebook's visible tests,
in a fresh kernel: passed, failing, not started), and `validate`, the server extension
that runs nbgrader's Validate off JupyterLab's event loop, within a time budget."""
