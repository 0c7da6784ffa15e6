#!/usr/bin/env python3
"""Machine code of every CUDA kernel of this tree against a baseline, kernel by kernel.

Compiles each cuda/src/*.cu of both trees to an sm_90 cubin (nvcc -cubin with the flags the
build uses, taken from BUILD/compile_commands.json) and compares, per function, its .text
bytes and section flags, its attributes in .nv.info (registers, frame and stack sizes) and
.nv.info.<function> (parameters, barriers, exits, ...), its shared-memory, local-memory and
parameter-bank sections, and its relocations by symbol name; file-level constant banks
(jump tables) are compared too. Needs only nvcc and Python (no cuobjdump): the cubin is an
ELF file read here. Line info (-lineinfo) lives in debug sections, which are not compared, so
moving code between files or lines does not count as a change.

Usage: scripts/sass_diff.py [--base REF] [--build DIR] [--work DIR [--reuse-base]] [--jobs N]
  --base REF   baseline commit (default: main), exported with git archive
  --build DIR  configured build of this tree with nvcc (default: build; cmake --preset default)
  --work DIR   keep the cubins there (base/, new/); --reuse-base: keep base/ if already built
Prints one line per kernel (identical / DIFFERENT / only in one tree) and a summary; exit
status 0 iff every function is identical and both trees have the same set. With cuobjdump on
PATH (CUDA toolkit, or pip nvidia-cuda-cuobjdump) the first differing SASS lines of each
DIFFERENT function follow (--work keeps the cubins for a closer look).
"""
import argparse
import concurrent.futures
import difflib
import hashlib
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STO_CUDA_ENTRY = 0x10  # st_other bit of a kernel (__global__) symbol
EIATTR_REGCOUNT = 0x2F  # .nv.info attribute: (function symbol, registers)
# File-local names carry a hash of the source path (_INTERNAL_<hash>_, _GLOBAL__N__<hash>_):
# not code.
INTERNAL = re.compile(r"(_INTERNAL_|_GLOBAL__N__)[0-9a-f]{8}_")


def compile_template(build):
    """The nvcc command of one cuda/src .cu file, as a list with the source at {src}."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    src_dir = os.path.join(ROOT, "cuda", "src") + os.sep
    for e in entries:
        if e["file"].startswith(src_dir) and e["file"].endswith(".cu"):
            args = shlex.split(e["command"])
            out, skip = [], False
            for a in args:
                if skip:
                    skip = False
                    continue
                if a in ("-MT", "-MF", "-o", "-x"):
                    skip = True
                    continue
                if a in ("-c", "-MD", e["file"]) or a.startswith("--generate-code"):
                    continue
                out.append(a)
            return out
    sys.exit(f"no cuda/src/*.cu in {build}/compile_commands.json: configure with nvcc first")


def compile_tree(tree, template, work, jobs):
    """Compiles every cuda/src/*.cu of `tree` to work/<name>.cubin; returns the cubin paths."""
    os.makedirs(work, exist_ok=True)
    src = os.path.join(tree, "cuda", "src")
    cus = sorted(f for f in os.listdir(src) if f.endswith(".cu"))

    def one(name):
        cmd = [a.replace(ROOT, tree) for a in template]
        cubin = os.path.join(work, name + ".cubin")
        cmd += ["-arch=sm_90", "-cubin", "-x", "cu", os.path.join(src, name), "-o", cubin]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"nvcc failed on {tree}/cuda/src/{name}:\n{r.stderr}")
        return cubin

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(one, cus))


def read_elf(path):
    """Sections {name: (header dict, bytes)} and symbols [(name, st_other, shndx)] of a cubin."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"\x7fELF" and data[4] == 2, f"{path}: not an ELF64 cubin"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    hdrs = []
    for i in range(shnum):
        (name, typ, flags, addr, off, size, link, info, align,
         entsize) = struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
        hdrs.append(dict(name=name, type=typ, flags=flags, off=off, size=size, link=link,
                         info=info, entsize=entsize))
    strtab = hdrs[shstrndx]

    def cstr(tab, off):
        start = tab["off"] + off
        return data[start:data.index(b"\0", start)].decode()

    sections = {}
    for h in hdrs:
        h["sname"] = cstr(strtab, h["name"])
        body = data[h["off"]:h["off"] + h["size"]] if h["type"] != 8 else b""  # NOBITS: none
        sections[h["sname"]] = (h, body)
    symbols = []
    for h in hdrs:
        if h["type"] == 2:  # SYMTAB
            names = hdrs[h["link"]]
            for k in range(h["size"] // 24):
                st_name, info, other, shndx, value, size = struct.unpack_from(
                    "<IBBHQQ", data, h["off"] + k * 24)
                symbols.append((cstr(names, st_name), other, shndx))
    return sections, symbols


def relocations(sections, symbols, name):
    """Relocations of section `name` as (offset, type, symbol, addend) tuples."""
    out = []
    for prefix, rela in ((".rela", True), (".rel", False)):
        entry = sections.get(prefix + name)
        if not entry:
            continue
        h, body = entry
        size = 24 if rela else 16
        for k in range(len(body) // size):
            off, info = struct.unpack_from("<QQ", body, k * size)
            add = struct.unpack_from("<q", body, k * size + 16)[0] if rela else 0
            out.append((off, info & 0xFFFFFFFF, INTERNAL.sub(r"\1", symbols[info >> 32][0]),
                        add))
    return out


def function_attributes(sections, symbols):
    """The file-level .nv.info attributes (registers, frame and stack sizes) by function:
    {name: [(attribute, value bytes)]}. Each is (format, attribute, size, symbol index, value)."""
    out = {}
    _, body = sections.get(".nv.info", (None, b""))
    i = 0
    while i + 4 <= len(body):
        fmt, attr = body[i], body[i + 1]
        if fmt == 4:  # EIFMT_SVAL: u16 size, then the value
            size, = struct.unpack_from("<H", body, i + 2)
            val, i = body[i + 4:i + 4 + size], i + 4 + size
            if size >= 4:
                sym, = struct.unpack_from("<I", val, 0)
                out.setdefault(symbols[sym][0], []).append((attr, val[4:]))
        else:
            i += 4
    return out


def fingerprints(cubins):
    """{function: (sha1, text bytes, registers, is_kernel)} plus file-level {key: sha1}."""
    funcs, files = {}, {}
    for path in cubins:
        sections, symbols = read_elf(path)
        entry = {s[0] for s in symbols if s[1] & STO_CUDA_ENTRY}
        attrs = function_attributes(sections, symbols)
        names = sorted(n[len(".text."):] for n in sections if n.startswith(".text."))
        for fn in names:
            h, text = sections[".text." + fn]
            d = hashlib.sha1(text)
            d.update(struct.pack("<Q", h["flags"]) + repr(sorted(attrs.get(fn, []))).encode())
            regs = [int.from_bytes(v, "little") for a, v in attrs.get(fn, []) if a == EIATTR_REGCOUNT]
            for sec in (".nv.info.", ".nv.shared.", ".nv.constant0.", ".nv.local."):
                if sec + fn in sections:
                    sh, body = sections[sec + fn]
                    d.update(sec.encode() + struct.pack("<Q", sh["size"]) + body)
            d.update(repr(relocations(sections, symbols, ".text." + fn)).encode())
            funcs[fn] = (d.hexdigest(), len(text), regs[0] if regs else -1, fn in entry, path)
        for sname, (h, body) in sections.items():
            if sname.startswith(".nv.constant") and not sname.startswith(".nv.constant0."):
                key = f"{sname} of {{{', '.join(names)}}}"
                d = hashlib.sha1(body + repr(relocations(sections, symbols, sname)).encode())
                files[key] = d.hexdigest()
    return funcs, files


def sass_lines(cubin, fn):
    """SASS of function `fn` in `cubin` (cuobjdump -sass), encodings and addresses dropped."""
    r = subprocess.run(["cuobjdump", "-sass", "-fun", fn, cubin], capture_output=True, text=True)
    out = []
    for line in r.stdout.splitlines():
        code = re.sub(r"/\*\s*[0-9a-fx]+\s*\*/", "", line).strip()
        if code:
            out.append(code)
    return out


def demangle(names):
    r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    out = r.stdout.splitlines() if r.returncode == 0 else []
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def report(old, new, old_files, new_files, base):
    """Prints the comparison; returns the number of differences."""
    names = sorted(set(old) | set(new))
    pretty = demangle(names)
    bad, diffs = 0, []
    kernels = sum(1 for n in names if (new.get(n) or old.get(n))[3])
    print(f"{'status':<10} {'bytes':>7} {'regs':>4}  function (base {base} vs working tree)")
    for n in names:
        o, w = old.get(n), new.get(n)
        kind = "" if (w or o)[3] else "  [device function]"
        if o and w and o[0] == w[0]:
            status = "identical"
        elif o and w:
            status, bad = "DIFFERENT", bad + 1
            diffs.append(n)
        else:
            status, bad = ("only-new" if w else "only-base"), bad + 1
        size, regs = (w or o)[1], (w or o)[2]
        print(f"{status:<10} {size:>7} {regs:>4}  {pretty[n]}{kind}")
    for n in diffs if shutil.which("cuobjdump") else []:
        print(f"--- {pretty[n]}: first differing SASS lines (base -, new +)")
        lines = difflib.unified_diff(sass_lines(old[n][4], n), sass_lines(new[n][4], n),
                                     lineterm="", n=1)
        for line in [l for l in lines if not l.startswith(("---", "+++"))][:20]:
            print("  " + line)
    for key in sorted(set(old_files) | set(new_files)):
        if old_files.get(key) != new_files.get(key):
            bad += 1
            print(f"DIFFERENT  file-level section {key}")
    print(f"{len(names)} functions ({kernels} kernels): "
          f"{'all identical' if bad == 0 else f'{bad} differ'}")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="main")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default=None, help="where cubins go (default: a temporary dir)")
    ap.add_argument("--reuse-base", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    template = compile_template(a.build)
    with tempfile.TemporaryDirectory(prefix="sass_diff.") as tmp:
        work = a.work or tmp
        base_dir = os.path.join(work, "base")
        if a.reuse_base and a.work and os.path.isdir(base_dir):
            base_cubins = [os.path.join(base_dir, f) for f in sorted(os.listdir(base_dir))]
        else:
            base_tree = os.path.join(work, "base-tree")
            shutil.rmtree(base_tree, ignore_errors=True)
            os.makedirs(base_tree)
            archive = subprocess.run(["git", "-C", ROOT, "archive", a.base], capture_output=True)
            if archive.returncode != 0:
                sys.exit(f"git archive {a.base}: {archive.stderr.decode().strip()}")
            subprocess.run(["tar", "-x", "-C", base_tree], input=archive.stdout, check=True)
            shutil.rmtree(base_dir, ignore_errors=True)
            base_cubins = compile_tree(base_tree, template, base_dir, a.jobs)
        old, old_files = fingerprints(base_cubins)
        new_dir = os.path.join(work, "new")
        shutil.rmtree(new_dir, ignore_errors=True)
        new, new_files = fingerprints(compile_tree(ROOT, template, new_dir, a.jobs))
        return 0 if report(old, new, old_files, new_files, a.base) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
