"""python -m macattn.loop check | study --out DIR (docs/in-the-loop.md)."""
import argparse
import os
import sys

# One BLAS and one OpenMP thread per process: the study parallelises over processes (--jobs),
# and single-threaded BLAS keeps every run's arithmetic in one fixed order. Both libraries read
# these variables when they load, which `python -m macattn.loop` does before this file runs
# (the package macattn imports them): the command re-executes itself once with them set.
_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _single_threaded() -> None:
    if os.environ.get("MACATTN_LOOP_EXEC") == "1":
        return
    env = dict(os.environ, MACATTN_LOOP_EXEC="1", **{v: "1" for v in _THREADS})
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", "macattn.loop"] + sys.argv[1:], env)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m macattn.loop",
                                 description="SmolLM2-135M with MAC attention in every layer")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("check", help="the reduced CI check (256 + 64 positions), JSON on stdout")
    st = sub.add_parser("study", help="the full study of docs/in-the-loop.md")
    st.add_argument("--out", required=True, help="output directory (created)")
    st.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    st.add_argument("--prompt", type=int, default=2048, help="teacher-forced prompt tokens")
    st.add_argument("--decode", type=int, default=4096, help="teacher-forced decode positions")
    st.add_argument("--greedy-prompt", type=int, default=1024, help="greedy prompt tokens")
    st.add_argument("--greedy-new", type=int, default=1024, help="greedy tokens generated")
    st.add_argument("--quick", action="store_true",
                    help="one point per policy and one greedy prompt (a smoke run)")
    co = sub.add_parser("collect", help="study.json and CSVs from DIR/jobs (a partial study)")
    co.add_argument("dir")
    tb = sub.add_parser("tables", help="docs/in-the-loop.md's tables from DIR/study.json")
    tb.add_argument("dir")
    bd = sub.add_parser("bound", help="how informative the per-step bound is (honest_bound.py)")
    bd.add_argument("--out", required=True, help="output directory (honest_bound.csv)")
    bd.add_argument("--trace", default="data/real/smollm2_4layers_512.h5")
    bd.add_argument("--layers", default="0,1,2,3", help="trace layers (default 0,1,2,3)")
    bd.add_argument("--model-layers", default="0,10,20,29",
                    help="their model layers, for the table (the fixture's: 0,10,20,29)")
    bd.add_argument("--tau", type=float, default=0.45)
    bd.add_argument("--ring", type=int, default=256)
    bd.add_argument("--tail", type=int, default=32)
    bd.add_argument("--prompt", type=int, default=256)
    a = ap.parse_args(argv)
    if a.cmd == "collect":
        from . import study
        study.collect(a.dir)
        return 0
    if a.cmd == "tables":
        import json
        from . import study
        with open(os.path.join(a.dir, "study.json")) as fh:
            result = json.load(fh)
        print(study.markdown(result))
        print()
        print(study.provenance(result))
        return 0
    if a.cmd == "bound":
        from . import honest_bound
        try:
            layers = [int(x) for x in a.layers.split(",")]
            mlayers = [int(x) for x in a.model_layers.split(",")]
        except ValueError:
            ap.error(f"--layers '{a.layers}' / --model-layers '{a.model_layers}': "
                     "comma-separated integers")
        for s in honest_bound.main(a.out, a.trace, layers, mlayers, a.tau, a.ring, a.tail,
                                   a.prompt):
            print(s)
        return 0
    if a.cmd == "check":
        from . import check
        check.run_check()
        return 0
    for name in ("jobs", "prompt", "decode", "greedy_prompt", "greedy_new"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} = {getattr(a, name)} must be >= 1")
    from . import study
    study.main(a.out, jobs=a.jobs, prompt=a.prompt, decode=a.decode,
               greedy_new=a.greedy_new, greedy_prompt=a.greedy_prompt, quick=a.quick)
    return 0


if __name__ == "__main__":
    _single_threaded()
    sys.exit(main())
