"""Command-line front ends: each module parses arguments, calls a library and renders."""
