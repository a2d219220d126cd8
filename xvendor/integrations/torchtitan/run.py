"""CPU launcher: ``python -m xvendor.integrations.torchtitan.run <torchtitan arguments>``.

Applies what a CPU needs (``cpu.prepare``: host device globals, SUM reductions for FSDP2 on
gloo, the dense-mask attention override, CUDA graphs off, the EP backend that works on
gloo) and then runs ``torchtitan.train.main()`` unchanged, with the same arguments. Under
torchrun::

    OMP_NUM_THREADS=1 torchrun --nproc-per-node 2 -m xvendor.integrations.torchtitan.run \\
        --module deepseek_v3 --config deepseek_v3_debugmodel \\
        --override.imports xvendor.integrations.torchtitan.overrides.xvendor_ops

``--xvendor-ft`` (ours, removed before torchtitan parses): torchtitan's fault-tolerant trainer
(``--module torchft.llama3 ...``) runs on ``xvendor.ft`` instead of torchft; ``--torchft``
keeps torchft but still applies ``--override.imports`` in that trainer (see ``ft``).

``XVENDOR_TITAN_COUNTS=DIR`` writes ``DIR/rank<R>.json`` at exit: how many times each
xvendor op ran through the overrides (tests read it). On a GPU node use torchtitan's own
launcher with the overrides only; none of this is needed there.
"""

from __future__ import annotations

import logging
import sys

from . import cpu


def main() -> None:
    ft = None
    for flag, on_xvendor in (("--xvendor-ft", True), ("--torchft", False)):
        if flag in sys.argv[1:]:
            sys.argv.remove(flag)
            ft = on_xvendor
    cpu.prepare()
    if ft is not None:
        from . import ft as ft_mod
        ft_mod.prepare(xvendor=ft)
    flags = cpu.cpu_flags(sys.argv[1:])
    logging.getLogger("xvendor.integrations.torchtitan").warning(
        "[xvendor cpu] flags added ahead of yours: %s", " ".join(flags))
    sys.argv[1:1] = flags
    from . import counts
    counts.write_at_exit()
    from torchtitan.train import main as torchtitan_main
    torchtitan_main()


if __name__ == "__main__":
    main()
