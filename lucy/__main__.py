import sys

from lucy.cli import main

sys.exit(main())
