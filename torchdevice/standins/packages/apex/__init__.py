"""torchdevice's stand-in for apex (served only under the runtime, when apex is not installed)."""

from torchdevice.reporting.counts import record_standin
from torchdevice.standins.missing import module_getattr

__getattr__ = module_getattr(__name__)
record_standin(__name__, "import")
