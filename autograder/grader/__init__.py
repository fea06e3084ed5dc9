"""The instructor's side: everything that runs in the grading process, or in the sandbox
launcher it starts, and never in a student's kernel.

Importing this package imports nothing: the sandbox launcher (`sandbox.launcher`) runs as
root with only the standard library. It does one thing to the process: see below.
"""

import sys

# jsonschema (which nbformat imports) registers its "iri" format checks with
# rfc3987_syntax when that is installed (jupyter-events pulls it in), and rfc3987_syntax
# builds some 40 Earley parsers when imported: 2 to 3.5 s in every grading process (the
# command, each worker). No schema the grader uses (nbformat's, nbgrader's) has an iri
# format; without the module, jsonschema leaves those two format checks out.
if "jsonschema" not in sys.modules:
    sys.modules.setdefault("rfc3987_syntax", None)
