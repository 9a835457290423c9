"""`python -m attention_explorer ...`: the console command `attention-explorer` (attention_explorer.cli)."""

import sys

from attention_explorer.cli import main

sys.exit(main())
