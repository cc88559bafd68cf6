"""`python -m agentskit_chat.cli`."""

import sys

from . import main

sys.exit(main())
