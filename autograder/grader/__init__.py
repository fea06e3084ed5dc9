"""The instructor's side: everything that runs in the grading process, or in the sandbox
launcher it starts, and never in a student's kernel.

Importing this package imports nothing: the sandbox launcher (`sandbox.launcher`) runs as
root with only the standard library.
"""
