"""The grading side of the pack: checks that test cells call, and the instructors' command line."""
