"""`python -m servecap.cli` runs the same app as the `servecap` script."""

from .app import main

main()
