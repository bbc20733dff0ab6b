"""Static warnings (eval.lint): each construct worth a reviewer's look is found, honest code is quiet."""

from pathlib import Path

import pytest

from eval.lint import lint_file, lint_source

REPO_ROOT = Path(__file__).resolve().parent.parent


def constructs(source: str) -> list[str]:
    return [w["construct"] for w in lint_source(source)]


# source -> the construct it must raise
FLAGGED = {
    "side-stream": ("import torch\ns = torch.cuda.Stream()\n", "torch.cuda.Stream"),
    "stream-context": ("import torch\nwith torch.cuda.stream(s):\n    pass\n", "torch.cuda.stream"),
    "event": ("import torch\ne = torch.cuda.Event(enable_timing=True)\n", "torch.cuda.Event"),
    "stream-by-alias": ("from torch.cuda import Stream as S\ns = S()\n", "torch.cuda.Stream"),
    "module-alias": ("import torch.cuda as tc\ns = tc.Stream()\n", "torch.cuda.Stream"),
    "gc": ("import gc\nobjs = gc.get_objects()\n", "gc"),
    "gc-from": ("from gc import get_objects\n", "gc"),
    "atexit": ("import atexit\natexit.register(print)\n", "atexit"),
    "os-exit": ("import os\nos._exit(0)\n", "os._exit"),
    "signal": ("import signal\n", "signal"),
    "ctypes": ("import ctypes\n", "ctypes"),
    "sys-modules": ("import sys\nm = sys.modules['eval.child']\n", "sys.modules"),
    "getframe": ("import sys\nf = sys._getframe(1)\n", "sys._getframe"),
    "frame-walk": ("def f(tb):\n    return tb.tb_frame.f_back\n", "f_back"),
    "inspect": ("import inspect\n", "inspect"),
    "open": ("data = open('/tmp/cache').read()\n", "open"),
    "pathlib-read": ("def f(p):\n    return p.read_bytes()\n", "read_bytes"),
    "pickle": ("import pickle\n", "pickle"),
    "torch-load": ("import torch\nx = torch.load('/tmp/x.pt')\n", "torch.load"),
    "socket": ("import socket\n", "socket"),
    "urllib": ("from urllib.request import urlopen\n", "urllib"),
    "requests": ("import requests\n", "requests"),
    "http": ("import http.client\n", "http"),
    "subprocess": ("import subprocess\n", "subprocess"),
    "os-system": ("import os\nos.system('ls')\n", "os.system"),
    "multiprocessing": ("import multiprocessing as mp\n", "multiprocessing"),
    "torch-multiprocessing": ("import torch.multiprocessing\n", "torch.multiprocessing"),
    "threading": ("import threading\n", "threading"),
    "builtins": ("import builtins\nbuiltins.print = None\n", "builtins"),
    "dunder-builtins": ("__builtins__['len'] = None\n", "__builtins__"),
    "exec": ("exec('x = 1')\n", "exec"),
    "dynamic-import": ("m = __import__('gc')\n", "__import__"),
    "importlib": ("import importlib\n", "importlib"),
    "evaluator-import": ("import eval.child\n", "eval"),
    "evaluator-from": ("from eval import runner\n", "eval"),
    "setattr-computed": ("import sys\nfor m in list(sys.modules.values()):\n    setattr(m, 'check', None)\n",
                         "setattr"),
}

PATCHES = {
    "timer": "import time\ntime.perf_counter = lambda: 0.0\n",
    "timer-alias": "import time as t\nt.perf_counter = None\n",
    "torch-function": "import torch\ntorch.linalg.householder_product = None\n",
    "torch-class": "import torch\ntorch.cuda.Event.elapsed_time = lambda *a: 0.0\n",
    "synchronize": "import torch\ntorch.cuda.synchronize = lambda: None\n",
    "setattr": "import torch\nsetattr(torch, 'allclose', lambda *a: True)\n",
    "delete": "import torch\ndel torch.triu\n",
    "tuple-target": "import time\ntime.time, x = None, 1\n",
    "module-dict": "import torch\ntorch.__dict__['isfinite'] = None\n",
    "submodule": "import eval.timing\neval.timing.flush_l2 = None\n",
}


@pytest.mark.parametrize("name", list(FLAGGED), ids=list(FLAGGED))
def test_construct_is_flagged(name):
    source, construct = FLAGGED[name]
    warnings = lint_source(source)
    hits = [w for w in warnings if w["construct"] == construct]
    assert hits, warnings
    assert all(set(w) == {"line", "construct", "text"} for w in warnings)
    assert all(isinstance(w["line"], int) and w["line"] >= 1 and w["text"] for w in warnings)


@pytest.mark.parametrize("name", list(PATCHES), ids=list(PATCHES))
def test_monkey_patching_is_flagged(name):
    warnings = [w for w in lint_source(PATCHES[name]) if w["construct"] == "monkey-patch"]
    assert len(warnings) == 1 and warnings[0]["line"] == 2, warnings


def test_warning_names_the_line_and_what_was_used():
    source = "import torch\n\n\ndef custom_kernel(A):\n    s = torch.cuda.Stream()\n    return torch.geqrf(A)\n"
    assert lint_source(source) == [{"line": 5, "construct": "torch.cuda.Stream",
                                    "text": "uses torch.cuda.Stream: work on a side stream can escape "
                                            "the measured region"}]


def test_each_use_is_reported_once_per_line():
    source = "import os\nos._exit(0); os._exit(1)\nos._exit(2)\n"
    assert [(w["line"], w["construct"]) for w in lint_source(source)] == [(2, "os._exit"), (3, "os._exit")]


@pytest.mark.parametrize("source", [
    "def custom_kernel(A)\n    return A\n",
    "x = (\n",
    "def f():\n\treturn 1\n        return 2\n",
    "x = 1\0\n",
], ids=["missing-colon", "unclosed", "bad-indent", "nul-byte"])
def test_unparsable_source_gives_one_warning(source):
    warnings = lint_source(source)
    assert len(warnings) == 1 and warnings[0]["construct"] == "syntax error", warnings
    assert "cannot parse" in warnings[0]["text"]


HONEST = {
    "geqrf": "import torch\n\n\ndef custom_kernel(A):\n    return torch.geqrf(A)\n",
    "triton-style": (
        "import math\nimport os\nimport torch\nimport triton\nimport triton.language as tl\n"
        "from functools import lru_cache\n\n"
        "INTERPRET = os.environ.get('TRITON_INTERPRET') == '1'\n\n"
        "@triton.jit\ndef _k(x_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n    x = tl.load(x_ptr + offs, mask=offs < n)\n"
        "    tl.store(x_ptr + offs, x * 2, mask=offs < n)\n\n"
        "@lru_cache(maxsize=None)\ndef _block(n):\n    return triton.next_power_of_2(n)\n\n"
        "def custom_kernel(A):\n    A = A.contiguous()\n    H = A.clone()\n"
        "    tau = torch.empty(A.shape[:-1], dtype=A.dtype, device=A.device)\n"
        "    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n"
        "    _k[(1,)](H, H.numel(), BLOCK=_block(H.numel()))\n    return H, tau\n"),
    "local-attribute-writes": ("class Box:\n    pass\n\n\ndef f():\n    b = Box()\n    b.value = 1\n"
                               "    b.items = []\n    return b\n"),
    "setattr-on-self": "class C:\n    def set(self, k, v):\n        setattr(self, k, v)\n",
    "builtin-shadowed-by-import": "from os.path import join as open\nx = open('a', 'b')\n",
}


@pytest.mark.parametrize("name", list(HONEST), ids=list(HONEST))
def test_honest_code_is_quiet(name):
    assert lint_source(HONEST[name]) == []


def test_repository_submission_is_quiet():
    submission = REPO_ROOT / "submission.py"
    if not submission.exists():
        pytest.skip("submission.py is not written yet")
    assert lint_file(submission) == []


def test_reference_kernel_is_quiet():
    assert lint_file(REPO_ROOT / "reference.py") == []
