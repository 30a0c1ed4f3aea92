import sys

from codegen.render import main

sys.exit(main())
