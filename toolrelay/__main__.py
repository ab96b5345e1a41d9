import sys

from toolrelay.cli import main

sys.exit(main())
