"""Every file gnnaudit reads or writes goes through this module.

Data files are data: nothing here runs code found in a file.

* **Planetoid raw pickles** (``ind.<name>.{x,tx,allx,y,ty,ally,graph}``) are read by
  :func:`load_planetoid_pickle`, a restricted unpickler that knows exactly the globals those
  files use (numpy arrays and dtypes, a scipy CSR matrix, ``defaultdict(list)``) and refuses
  every other one before it is called.
* **torch files** are read by :func:`safe_torch_load` (and checked without torch, from the
  archive and its pickle's opcodes alone, by :func:`precheck_torch_file`, so a bad file is
  refused before torch loads): ``torch.load(weights_only=True)`` with an
  explicit allow-list (e.g. :func:`pyg_data_classes` for a ``torch.save(Data(...))`` file). Every
  global the file names is checked against that list first (classes other libraries registered
  process-wide are refused too), and there is never a fallback to full unpickling.
* **numpy files**: :func:`load_npz` / :func:`load_npy` always use ``allow_pickle=False``.
* **text files**: :func:`read_csv`, :func:`read_json`, :func:`read_text` and
  :func:`load_text_array` turn a missing file, a folder, a binary or empty file, a ragged or
  undecodable table into one :class:`~gnnaudit.errors.InvalidInputError` line naming the
  argument and the file.

Writers are atomic. :func:`atomic_file` (and :func:`atomic_write_text`,
:func:`atomic_write_bytes`) write a temporary sibling and move it into place with
``os.replace`` (or a no-clobber hard link when ``force=False``), so a file appears whole or not
at all. :func:`atomic_output_dir` gives a private temporary folder next to the destination and
moves it into place when the block succeeds, so concurrent or failed runs never mix or destroy
outputs; ``force`` replaces only the files gnnaudit wrote (listed in the folder's manifest,
:mod:`gnnaudit.safe_io.manifest`). :func:`check_outputs_apart` refuses an output that is, holds or
lies inside an input. :func:`check_output_file` / :func:`check_output_dir` validate a destination *before* a
long computation starts.

This is a leaf package: it imports only :mod:`gnnaudit.errors` and third-party libraries (torch,
pandas, scipy and torch_geometric lazily), so every layer may use it.
"""

from __future__ import annotations

from gnnaudit.safe_io.paths import (
    check_input_dir,
    check_input_file,
    check_output_dir,
    check_output_file,
    check_outputs_apart,
)
from gnnaudit.safe_io.planetoid import load_planetoid_pickle
from gnnaudit.safe_io.readers import (
    load_npy,
    load_npz,
    load_text_array,
    precheck_npz_file,
    read_csv,
    read_json,
    read_text,
)
from gnnaudit.safe_io.torch_files import precheck_torch_file, pyg_data_classes, safe_torch_load
from gnnaudit.safe_io.writers import (
    atomic_file,
    atomic_output_dir,
    atomic_write_bytes,
    atomic_write_text,
)

__all__ = [
    "check_input_file",
    "check_input_dir",
    "check_output_file",
    "check_output_dir",
    "check_outputs_apart",
    "read_csv",
    "read_json",
    "read_text",
    "load_text_array",
    "load_npz",
    "load_npy",
    "load_planetoid_pickle",
    "precheck_npz_file",
    "precheck_torch_file",
    "pyg_data_classes",
    "safe_torch_load",
    "atomic_file",
    "atomic_write_text",
    "atomic_write_bytes",
    "atomic_output_dir",
]
