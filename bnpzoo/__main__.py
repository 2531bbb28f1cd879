import sys

from bnpzoo.cli import main

sys.exit(main())
