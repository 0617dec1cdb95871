"""The `tunelab` commands that live in no other part, one module per group, and how a failed
command ends; `tunelab.cli` parses the command line and hands each command its arguments."""
