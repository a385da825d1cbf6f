"""An MCP "server" that dies before answering: it prints a reason on stderr and exits 2."""

import sys

sys.stderr.write("broken server: missing configuration DEMO_URL\n")
sys.exit(2)
