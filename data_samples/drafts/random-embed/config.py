"""Tripwire, not a config class: eagle3_nb must never execute checkpoint code.

Importing or running this file leaves a file named EXECUTED next to it; the sample tests look
for it (and for any file the generator did not write).
"""
from pathlib import Path

Path(__file__).with_name("EXECUTED").write_text("config.py was executed\n")
