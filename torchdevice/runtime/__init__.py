"""The runtime: what ``install()`` patches so that ``"cuda"`` means the target device.

- :mod:`.activation`: ``install``/``uninstall``, the order of the patches, the feature modules;
- :mod:`.devices`, :mod:`.redirect`: what ``"cuda"`` means and the per-op redirect counters;
- :mod:`.patching`: patches that are undone exactly; :mod:`.compilers`: TorchScript and Dynamo
  keep recognizing wrapped functions;
- the entry points written by hand: :mod:`.tensors`, :mod:`.data`, :mod:`.amp`, :mod:`.classes`;
- :mod:`.emulation`: the ``torch.cuda`` namespace on a machine without CUDA; :mod:`.views`: who asks;
- :mod:`.processes`: the installation every process the program starts inherits (with the start-up
  hook ``_torchdevice_startup``); :mod:`.bindings`: torch functions bound by name before ``install()``;
- :mod:`.report`: what was redirected and what fell back.

The generated wrappers and tables it installs are in ``torchdevice_generated``.
"""
