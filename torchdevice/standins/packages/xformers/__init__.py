"""torchdevice's stand-in for xformers (served only under the runtime, when xformers is not installed)."""

from torchdevice.reporting.counts import record_standin
from torchdevice.standins.missing import module_getattr

__version__ = "0.0.32"
__getattr__ = module_getattr(__name__)
record_standin(__name__, "import")
