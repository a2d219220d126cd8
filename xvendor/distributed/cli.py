"""``xvendor run``, ``xvendor coordinator``, ``xvendor fr analyze`` and ``xvendor demo elastic``.

Wire into ``xvendor/cli.py``'s ``build_parser()`` with
``from .distributed.cli import add_parsers`` and ``add_parsers(sub)``; each subcommand sets
``fn`` like the others.
"""

from __future__ import annotations

import argparse
import json
import sys


def cmd_run(args) -> int:
    from .agent import Agent
    from .control import Timing
    argv = [sys.executable, args.script, *args.script_args]
    agent = Agent(Timing(hb_timeout_s=args.hb_timeout), fr_dir=args.fr_dir)
    print(f"xvendor run: store 127.0.0.1:{agent.port}, {args.nproc} workers, "
          f"up to {args.replace} replacement(s)", file=sys.stderr)
    try:
        agent.found_commands(args.nproc, argv)
        replaced, seen = 0, set()
        while not agent.wait(0.2):
            for member, why in list(agent.deaths.items()):
                if member in seen:
                    continue
                seen.add(member)
                print(f"xvendor run: member {member} failed: {why}", file=sys.stderr)
                if replaced < args.replace:
                    new = agent._ctl.new_id()
                    agent.start_command(argv, new, "newcomer")
                    replaced += 1
                    print(f"xvendor run: started replacement member {new}", file=sys.stderr)
    except KeyboardInterrupt:
        return 130
    finally:
        agent.close()
    codes = list(agent.exitcodes().values())
    ok = codes.count(0)
    crashed = [c for c in codes if c is not None and c > 0]  # signals are the faults survived
    print(f"xvendor run: {ok} of {len(codes)} processes finished cleanly"
          + (f", {len(crashed)} exited with an error" if crashed else ""), file=sys.stderr)
    return 0 if ok and not crashed else 1


def cmd_fr_analyze(args) -> int:
    from .recorder import analyze, format_analysis, groups_in
    results = [analyze(args.dir, lane, inc) for inc, lane in groups_in(args.dir) or [(None, 0)]]
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results, indent=2))
    else:
        print("\n".join(format_analysis(r) for r in results))
    return 0


def cmd_demo_elastic(args) -> int:
    from . import demo
    return demo.run(steps=args.steps, ranks=args.ranks)


def cmd_coordinator(args) -> int:
    from .coordinator import run
    return run(args)


def add_parsers(sub) -> None:
    """Add ``run``, ``coordinator``, ``fr`` and ``demo`` to an argparse subparsers object."""
    r = sub.add_parser("run", help="start N workers under an agent that hosts the store, "
                                   "posts death notices and starts replacements")
    r.add_argument("--nproc", type=int, required=True)
    r.add_argument("--replace", type=int, default=0,
                   help="start up to this many replacement workers (as newcomers)")
    r.add_argument("--hb-timeout", type=float, default=3.0,
                   help="seconds without a heartbeat before a worker counts as hung")
    r.add_argument("--fr-dir", default=None, help="where workers dump the flight recorder")
    r.add_argument("script")
    r.add_argument("script_args", nargs=argparse.REMAINDER)
    r.set_defaults(fn=cmd_run)

    from .coordinator import add_arguments as coordinator_arguments
    c = sub.add_parser("coordinator", help="host the store and watch the workers of a job "
                                           "whose replica groups others launch (torchrun, "
                                           "Slurm, Kubernetes); workers join from the env")
    coordinator_arguments(c)
    c.set_defaults(fn=cmd_coordinator)

    fr = sub.add_parser("fr", help="flight recorder tools")
    fr_sub = fr.add_subparsers(dest="fr_command", required=True)
    a = fr_sub.add_parser("analyze", help="which collective the survivors waited in, and "
                                          "which ranks never reached it")
    a.add_argument("dir")
    a.add_argument("--json", action="store_true")
    a.set_defaults(fn=cmd_fr_analyze)

    d = sub.add_parser("demo", help="demonstrations")
    d_sub = d.add_subparsers(dest="demo_command", required=True)
    e = d_sub.add_parser("elastic", help="4 gloo ranks train a small MoE; one is killed, a "
                                         "replacement joins; parameters proven identical")
    e.add_argument("--steps", type=int, default=150)
    e.add_argument("--ranks", type=int, default=4)
    e.set_defaults(fn=cmd_demo_elastic)


def main(argv=None) -> int:
    """Stand-alone entry (``python -m xvendor.distributed.cli``) until xvendor/cli.py wires it."""
    p = argparse.ArgumentParser(prog="xvendor")
    add_parsers(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
