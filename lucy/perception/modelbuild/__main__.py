"""``python -m lucy.perception.modelbuild``: build the model files that are missing (scripts/setup.sh runs it)."""

import sys

from lucy.perception.modelbuild.build import main

sys.exit(main())
