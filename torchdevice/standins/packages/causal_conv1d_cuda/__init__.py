"""torchdevice's stand-in for causal-conv1d's compiled ``causal_conv1d_cuda`` (served only under the runtime, when
it is not importable), computed by :mod:`torchdevice.standins.causal_conv`; the C++ functions' positional
arguments, results written into the caller's tensors."""

from torchdevice.reporting.counts import record_standin
from torchdevice.standins import causal_conv
from torchdevice.standins.missing import module_getattr


def causal_conv1d_fwd(x, weight, bias, seq_idx, initial_states, out, final_states_out, silu_activation, /):
    """Writes ``out`` ``(batch, dim, seqlen)`` and ``final_states_out`` ``(batch, dim, width - 1)`` when given."""
    record_standin("causal_conv1d_cuda.causal_conv1d_fwd", x.device.type)
    causal_conv.causal_conv1d_fwd(x, weight, bias, seq_idx, initial_states, out, final_states_out, silu_activation)


def causal_conv1d_bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight, dbias,
                      dinitial_states, silu_activation, /):
    """Writes ``dx`` and ``dinitial_states``, adds into ``dweight`` and ``dbias`` (float32, zeroed by the caller)."""
    record_standin("causal_conv1d_cuda.causal_conv1d_bwd", x.device.type)
    causal_conv.causal_conv1d_bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight, dbias,
                                  dinitial_states, silu_activation)


def causal_conv1d_update(x, conv_state, weight, bias, out, silu_activation, cache_seqlens, conv_state_indices, /):
    """Writes ``out`` and updates ``conv_state`` in place (a decoding step)."""
    record_standin("causal_conv1d_cuda.causal_conv1d_update", x.device.type)
    causal_conv.causal_conv1d_update(x, conv_state, weight, bias, out, silu_activation, cache_seqlens,
                                     conv_state_indices)


__getattr__ = module_getattr(__name__)
record_standin(__name__, "import")
