"""The runtime: what ``install()`` patches so that ``"cuda"`` means the target device.

- :mod:`.activation`: ``install``/``uninstall``, the target, the order of the patches, the feature packages;
- :mod:`.installation`: the :class:`~.installation.Installation` every patch is handed; :mod:`.device_maps`:
  what ``"cuda"`` (and ``cuda:N``, an ordinal) means for N emulated devices;
- the entry points written by hand: :mod:`.tensors` (moves and where tensors live), :mod:`.checkpoints`
  (``torch.load``), :mod:`.amp` and :mod:`.autocast_policy` (CUDA's autocast), :mod:`.device_classes`
  (``torch.device``, ``Generator``, ``Stream``, ``Event``);
- :mod:`.emulation`: the ``torch.cuda`` namespace on a machine without CUDA;
- :mod:`.processes`: the installation every process the program starts inherits (with the start-up hook
  ``_torchdevice_startup``); :mod:`.bindings`: torch functions bound by name before ``install()``;
  :mod:`.compilers`: TorchScript and Dynamo keep recognizing wrapped functions.

It stands on :mod:`torchdevice.device` and installs :mod:`torchdevice.fallback`, :mod:`torchdevice.distributed`
and :mod:`torchdevice.standins` by name. The generated wrappers and tables it installs are in
``torchdevice_generated``.
"""
