"""torchdevice's stand-in for mamba-ssm's compiled ``selective_scan_cuda`` (served only under the runtime, when
it is not importable), computed by :mod:`torchdevice.standins.scan`; the C++ functions' positional arguments."""

from torchdevice.reporting.counts import record_standin
from torchdevice.standins.missing import module_getattr
from torchdevice.standins.scan import selective_scan_bwd, selective_scan_fwd


def fwd(u, delta, A, B, C, D, z, delta_bias, delta_softplus, /):
    """``[out, x]`` (with ``z``: ``[out, x, out_z]``); ``x`` holds the state at each 2048-step chunk's end."""
    record_standin("selective_scan_cuda.fwd", u.device.type)
    return selective_scan_fwd(u, delta, A, B, C, D, z, delta_bias, delta_softplus)


def bwd(u, delta, A, B, C, D, z, delta_bias, dout, x, out, dz, delta_softplus, recompute_out_z, /):
    """``[du, ddelta, dA, dB, dC, dD, ddelta_bias]`` (+ ``dz`` with ``z``, + ``out_z`` with ``recompute_out_z``);
    ``x`` (the forward's chunk states) is not needed: the scan is recomputed."""
    record_standin("selective_scan_cuda.bwd", u.device.type)
    return selective_scan_bwd(u, delta, A, B, C, D, z, delta_bias, dout, out, dz, delta_softplus, recompute_out_z)


__getattr__ = module_getattr(__name__)
record_standin(__name__, "import")
