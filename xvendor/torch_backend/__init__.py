"""The ``torch`` backend: torch's own ops, the floor of selection on every device.

Where no kernel of ours is a tuned winner or an evidence-backed default, a call runs on
torch's op (``torch.mm``/``addmm``, ``F.grouped_mm``, ``F.rms_norm``, ``torch.topk``,
``F.scaled_mm``, ``F.scaled_grouped_mm``): xvendor is then never slower than the framework
it plugs into. Where torch's op takes a call is data (``rules.py``, per device type, arch,
dtype and recipe); xvendor's wider semantics (bias and ``out_dtype`` on every layout, any
strides, zeros past ``offs[-1]``) are added around torch's op with device ops only
(``kernels.py``): nothing in this backend reads a tensor's values on the host. A call the
rules refuse goes to the next candidate (the ``reference``). The record: ``record.py``.
"""
