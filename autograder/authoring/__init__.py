"""The instructor's tools for the course itself: `generate` (exercises/ and solutions/
from source/), `selfcheck` (do the tests tell right from wrong, under the real nbgrader),
`fingerprints` (writes the table that names known mistakes), `notebook_guard` (what a
committed notebook may not show), `madeup` and `demo` (made-up classes).
"""
