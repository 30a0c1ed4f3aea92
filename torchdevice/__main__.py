import sys

from torchdevice.cli import main

sys.exit(main())
