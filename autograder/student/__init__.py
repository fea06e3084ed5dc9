"""What a student runs besides the notebooks: `progress` (every notebook's visible tests,
in a fresh kernel: passed, failing, not started)."""
