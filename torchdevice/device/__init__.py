"""The device layer, at the bottom of the runtime side: what a target is and what its tensors are.

- :mod:`.target`: the :class:`~.target.Target` (what ``"cuda"`` means, its dispatch key and kernel table, the
  device type its tensors are in C++, how it keeps dtypes it has none of) and resolving a target's name;
- :mod:`.residence`: which host tensors stand for CUDA tensors (a mark on the storage) and the memory ledger;
- :mod:`.hosted`: device tensors of the dtypes MPS has none of, kept by the host;
- :mod:`.errors`: which exceptions mean "this device cannot run this call" rather than a user error;
- :mod:`.aten`: walking aten calls, finding overloads, what a schema says; :mod:`.to_arguments`: reading
  ``Tensor.to``'s arguments.

It imports nothing of the package but its utilities (:mod:`torchdevice.patching`, :mod:`torchdevice.reporting`);
``tests/architecture`` holds that.
"""
