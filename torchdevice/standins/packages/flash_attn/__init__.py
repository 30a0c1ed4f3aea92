"""torchdevice's stand-in for flash-attn 2 (served only under the runtime, when flash-attn is not installed)."""

from torchdevice.reporting.counts import record_standin
from torchdevice.standins.missing import module_getattr

from .flash_attn_interface import (
    flash_attn_func,
    flash_attn_kvpacked_func,
    flash_attn_qkvpacked_func,
    flash_attn_varlen_func,
    flash_attn_varlen_kvpacked_func,
    flash_attn_varlen_qkvpacked_func,
    flash_attn_with_kvcache,
)

__version__ = "2.8.3"
__all__ = ["flash_attn_func", "flash_attn_kvpacked_func", "flash_attn_qkvpacked_func", "flash_attn_varlen_func",
           "flash_attn_varlen_kvpacked_func", "flash_attn_varlen_qkvpacked_func", "flash_attn_with_kvcache"]
__getattr__ = module_getattr(__name__)
record_standin(__name__, "import")
