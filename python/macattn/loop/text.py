"""The text of the in-the-loop runs: the licence texts every Debian 12 machine has under
/usr/share/common-licenses (docs/in-the-loop.md gives their sha256 sums), tokenised without
special tokens and preceded by one ``<|endoftext|>`` token, as tools/record-trace does.

The recorder's traces (docs/real-traces.md) and every configuration choice made on them read
the first 8192 tokens of GPL-3, Apache-2.0, … (``RECORDER_FILES``): all of GPL-3 and the
start of Apache-2.0. The in-the-loop study reads text none of that touched:

  * ``HELDOUT_FILES`` (teacher-forced runs): MPL-2.0, LGPL-2.1, Artistic, CC0-1.0, joined as
    the recorder joins files (about 13,000 tokens; the study uses the first 6145);
  * ``PROMPT_FILES`` (greedy generation): GPL-2, MPL-1.1 and GFDL-1.2, one prompt each (its
    first tokens).
"""
from __future__ import annotations

import hashlib
import os
from typing import List, Sequence, Tuple

LICENSE_DIR = "/usr/share/common-licenses"
SEPARATOR = "\n\n"
RECORDER_FILES = ["GPL-3", "Apache-2.0", "GPL-2", "LGPL-2.1", "LGPL-3", "MPL-2.0", "Artistic",
                  "GFDL-1.3", "CC0-1.0", "BSD"]
HELDOUT_FILES = ["MPL-2.0", "LGPL-2.1", "Artistic", "CC0-1.0"]
PROMPT_FILES = ["GPL-2", "MPL-1.1", "GFDL-1.2"]


def read(names: Sequence[str]) -> Tuple[str, List[Tuple[str, str]]]:
    """The files joined as the recorder joins them; also [(name, sha256)]."""
    parts, sums = [], []
    for n in names:
        p = n if os.sep in n else os.path.join(LICENSE_DIR, n)
        if not os.path.isfile(p):
            raise FileNotFoundError(f"{p}: no such file (a Debian machine has "
                                    f"{LICENSE_DIR}; pass another text with --text-files)")
        with open(p, "rb") as fh:
            raw = fh.read()
        sums.append((n, hashlib.sha256(raw).hexdigest()))
        parts.append(raw.decode("utf-8").strip("\n"))
    return SEPARATOR.join(parts) + "\n", sums


def tokens(model, names: Sequence[str], count: int, doc_token: bool = True) -> List[int]:
    """The first `count` tokens of the files (after the document token)."""
    text, _ = read(names)
    ids = ([model.token_id("<|endoftext|>")] if doc_token else []) + model.encode(text)
    if len(ids) < count:
        raise ValueError(f"the text of {list(names)} has {len(ids)} tokens, {count} are needed")
    return ids[:count]
