"""Probes for `gen-recipe detect`: read a site's facts off the machine itself.

runner.py runs one command (or reads one file) per probe; table.py lists the probes; parsers.py
turns each probe's text into clues; facts.py decides the facts from all clues (each with how it was
found); toml.py writes them as a site TOML; compare.py compares a declared site with them.
The entry points for users and the benchmark suite are in generator.detect.machine.
"""
