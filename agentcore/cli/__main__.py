"""``python -m agentcore.cli``."""

from . import main

main()
