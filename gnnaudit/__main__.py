"""``python -m gnnaudit``: the ``gnnaudit`` command."""

import sys

from gnnaudit.cli.main import main

sys.exit(main())
