"""What the Python baselines beside mac-bench share: the grid's options (mac-bench's
defaults), the timing of replays and the CSV written under its name only when complete."""
import contextlib
import os
import sys


def add_grid_args(ap, page_size=True):
    """mac-bench's grid options and defaults (tools/mac-bench/mac_bench.cpp, Options)."""
    ap.add_argument("--hkv", type=int, nargs="+", default=[8, 4])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument("--ctx", type=int, nargs="+", default=[32768, 65536, 130048])
    ap.add_argument("--hq", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    if page_size:
        ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--timing", choices=("launch", "queued"), default="launch",
                    help="launch: each replay submitted to an idle device (its time holds the "
                    "host's launch latency); queued: each replay queued behind a busy wait (its "
                    "time is the device's execution alone), as mac-bench --timing")


def add_mac_args(ap):
    """mac-bench's options of the MAC steps: hit fractions, M, r, the lags, the seed."""
    ap.add_argument("--hit", type=float, nargs="+", default=[0.0, 0.5, 0.9, 0.95, 1.0],
                    help="hit fractions (list)")
    ap.add_argument("--ring", type=int, default=512, help="M")
    ap.add_argument("--tail", type=int, default=256, help="r")
    ap.add_argument("--max-lag", type=int, default=64, help="hit lags uniform in 1..max-lag")
    ap.add_argument("--seed", type=int, default=20261129)


def check_grid(a, prog):
    """Exits naming the first value out of range: sizes >= 1, Hq a multiple of every Hkv."""
    for name in ("hkv", "batch", "ctx"):
        bad = [x for x in getattr(a, name) if x < 1]
        if bad:
            sys.exit(f"{prog}: --{name} {bad[0]} must be >= 1")
    for name in ("hq", "head_dim", "reps") + (("page_size",) if hasattr(a, "page_size") else ()):
        if getattr(a, name) < 1:
            sys.exit(f"{prog}: --{name.replace('_', '-')} {getattr(a, name)} must be >= 1")
    if a.warmup < 0:
        sys.exit(f"{prog}: --warmup {a.warmup} must be >= 0")
    bad = [h for h in a.hkv if a.hq % h]
    if bad:
        sys.exit(f"{prog}: --hq {a.hq} is not a multiple of --hkv {bad[0]}")


def quantiles(ms):
    """(median, p10, p90) of a list of times, as mac-bench reports them."""
    s = sorted(ms)
    return s[len(s) // 2], s[len(s) // 10], s[len(s) * 9 // 10]


# mac-bench's kQueueAheadUs: the device's busy wait before each replay under --timing queued,
# far longer than the host takes to submit between(), the events and the replay from Python.
QUEUE_AHEAD_US = 200


def busy_wait(us):
    """Keeps the current stream busy for at least `us` microseconds: torch's spin kernel counts
    SM cycles, 2000 a microsecond (Hopper's SM clock is at most 1.98 GHz)."""
    import torch
    torch.cuda._sleep(int(us * 2000))


def time_replays(replay, warmup, reps, between=None, stream=None, queued=False):
    """Times (ms) of `reps` replays after `warmup`, each alone between two CUDA events on
    `stream` (default: the current one); between() runs untimed before each replay. With
    `queued`, each replay is queued behind a busy wait on the device (mac-bench --timing
    queued): the time is the device's execution, not the host's launch latency."""
    import torch
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
        for i in range(warmup + reps):
            if queued:
                busy_wait(QUEUE_AHEAD_US)
            if between is not None:
                between()
            e0.record()
            replay()
            e1.record()
            e1.synchronize()
            if i >= warmup:
                ms.append(e0.elapsed_time(e1))
    return ms


@contextlib.contextmanager
def csv_out(path):
    """The CSV file to write (stdout when path is empty): written as path.tmp and renamed to
    path when the block ends, so a reader never sees a file being written under the name; a
    run ended by an exception leaves the rows done and a last comment line naming it."""
    if not path:
        yield sys.stdout
        return
    tmp = path + ".tmp"
    f = open(tmp, "w")
    try:
        yield f
    except BaseException as ex:
        print(f"# run ended by {type(ex).__name__}: {' '.join(str(ex).split())[:300]}", file=f)
        raise
    finally:
        f.close()
        os.replace(tmp, path)
