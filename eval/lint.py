"""Static warnings on a submission's source: constructs that deserve a reviewer's look.

``lint_source(source)`` parses the source with ``ast`` (it never imports or runs it) and returns a
list of ``{"line", "construct", "text"}`` dicts, in line order.  These are warnings, not verdicts:
the evaluator's isolation is what keeps a run honest; the warnings tell a reviewer where to look
(side streams and events, the garbage collector, exit hooks, signals, raw memory, frame walking,
files, the network, processes and threads, patched builtins or modules).

Names are resolved through the file's own imports, so ``from torch.cuda import Stream as S`` and
``import gc as g`` are seen for what they are.
"""

from __future__ import annotations

import ast

# Importing any of these modules (or a submodule) is worth a look.  module -> reason
FLAGGED_MODULES = {
    "gc": "the garbage collector can reach objects the submission was never given",
    "atexit": "exit hooks run after the submission's calls, outside any measurement",
    "signal": "signal handlers can interfere with the evaluator's timeouts",
    "ctypes": "raw memory and C calls bypass Python entirely",
    "cffi": "raw memory and C calls bypass Python entirely",
    "inspect": "frame and source inspection can reach the caller's objects",
    "pickle": "deserialization can run arbitrary code and replay stored results",
    "marshal": "deserialization can replay stored results",
    "shelve": "a persistent store can replay results across runs",
    "dill": "deserialization can run arbitrary code and replay stored results",
    "joblib": "a persistent cache can replay results across runs",
    "sqlite3": "a persistent store can replay results across runs",
    "tempfile": "temporary files can carry results across calls or runs",
    "shutil": "file operations outside the contract",
    "mmap": "memory-mapped files can carry results across runs",
    "pathlib": "reading or writing files",
    "socket": "network access",
    "ssl": "network access",
    "urllib": "network access",
    "requests": "network access",
    "httpx": "network access",
    "http": "network access",
    "ftplib": "network access",
    "subprocess": "starting other processes",
    "multiprocessing": "starting other processes",
    "concurrent": "work on other threads or processes can outlive a call",
    "threading": "work on another thread can outlive a call and escape the measurement",
    "_thread": "work on another thread can outlive a call and escape the measurement",
    "asyncio": "work scheduled on an event loop can outlive a call",
    "builtins": "patching builtins changes code the submission does not own",
    "importlib": "dynamic imports and reloads hide what the submission uses",
    "eval": "the evaluator's own modules are not part of the contract",
    "faulthandler": "fault handlers interfere with the evaluator's fault reporting",
    "sys.monitoring": "execution monitoring reaches the caller's code",
}

# Referring to any of these dotted names (or anything below them) is worth a look.  name -> reason
FLAGGED_NAMES = {
    "torch.cuda.Stream": "work on a side stream can escape the measured region",
    "torch.cuda.stream": "work on a side stream can escape the measured region",
    "torch.cuda.ExternalStream": "work on a side stream can escape the measured region",
    "torch.cuda.set_stream": "switching streams can move work out of the measured region",
    "torch.cuda.Event": "events on other streams can be used to game the clock",
    "torch.Stream": "work on a side stream can escape the measured region",
    "torch.Event": "events on other streams can be used to game the clock",
    "torch.cuda._sleep": "spinning the GPU on purpose",
    "torch.multiprocessing": "starting other processes",
    "torch._C": "private torch internals",
    "torch.load": "reading stored tensors can replay results across runs",
    "torch.save": "writing tensors to disk can replay results across runs",
    "torch.from_file": "reading stored tensors can replay results across runs",
    "numpy.load": "reading stored arrays can replay results across runs",
    "numpy.save": "writing arrays to disk can replay results across runs",
    "numpy.savez": "writing arrays to disk can replay results across runs",
    "numpy.fromfile": "reading stored arrays can replay results across runs",
    "numpy.memmap": "memory-mapped files can carry results across runs",
    "os._exit": "leaving the process without the evaluator's cleanup",
    "os.abort": "killing the process",
    "os.kill": "signalling processes",
    "os.killpg": "signalling processes",
    "os.system": "starting other processes",
    "os.popen": "starting other processes",
    "os.fork": "starting other processes",
    "os.forkpty": "starting other processes",
    "os.posix_spawn": "starting other processes",
    "os.posix_spawnp": "starting other processes",
    "os.open": "raw file descriptors: reading files or writing to inherited descriptors",
    "os.fdopen": "raw file descriptors: reading files or writing to inherited descriptors",
    "os.read": "raw file descriptors: reading files or writing to inherited descriptors",
    "os.write": "raw file descriptors: reading files or writing to inherited descriptors",
    "os.dup": "duplicating file descriptors",
    "os.dup2": "duplicating file descriptors",
    "os.listdir": "looking at the file system",
    "os.scandir": "looking at the file system",
    "os.walk": "looking at the file system",
    "os.remove": "changing the file system",
    "os.unlink": "changing the file system",
    "os.rename": "changing the file system",
    "os.replace": "changing the file system",
    "os.makedirs": "changing the file system",
    "os.mkdir": "changing the file system",
    "io.open": "reading or writing files",
    "io.FileIO": "reading or writing files",
    "sys.modules": "reaching other modules (the evaluator's included) through the import table",
    "sys._getframe": "walking stack frames to reach the caller's objects",
    "sys._current_frames": "walking stack frames to reach other threads' objects",
    "sys.settrace": "tracing the caller's code",
    "sys.setprofile": "profiling hooks on the caller's code",
    "sys.addaudithook": "audit hooks on the caller's code",
    "sys.exit": "leaving the process",
    "reference.check_implementation": "the checker is not the submission's to call or change",
    "reference.check_details": "the checker is not the submission's to call or change",
    "reference.generate_input": "predicting the evaluator's inputs",
}

# Builtin functions worth a look when called.  name -> (construct, reason)
FLAGGED_BUILTINS = {
    "open": ("open", "reading or writing files"),
    "exec": ("exec", "running code built at run time"),
    "eval": ("eval", "running code built at run time"),
    "compile": ("compile", "running code built at run time"),
    "__import__": ("__import__", "a dynamic import hides what the submission uses"),
    "globals": ("globals", "rewriting module globals at run time"),
}

# Attribute names that reach frames, globals or raw file I/O whatever object they hang off.
FLAGGED_ATTRIBUTES = {
    "f_back": "walking stack frames to reach the caller's objects",
    "f_globals": "walking stack frames to reach the caller's objects",
    "f_locals": "walking stack frames to reach the caller's objects",
    "tb_frame": "walking stack frames to reach the caller's objects",
    "gi_frame": "walking stack frames to reach the caller's objects",
    "__globals__": "reaching another function's module globals",
    "__builtins__": "patching builtins changes code the submission does not own",
    "__subclasses__": "reaching classes through the type hierarchy",
    "read_text": "reading files",
    "read_bytes": "reading files",
    "write_text": "writing files",
    "write_bytes": "writing files",
}


def _dotted(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None when the chain does not start at a plain name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def _match(name: str, table: dict) -> str | None:
    """The entry of ``table`` that ``name`` is, or lies below (``torch.cuda.Stream.wait``)."""
    parts = name.split(".")
    for size in range(len(parts), 0, -1):
        prefix = ".".join(parts[:size])
        if prefix in table:
            return prefix
    return None


class _Linter(ast.NodeVisitor):
    def __init__(self):
        self.aliases: dict[str, str] = {}  # local name -> dotted name it was imported as
        self.warnings: list[dict] = []
        self._seen: set[tuple[int, str]] = set()

    # -- recording ------------------------------------------------------------------------
    def warn(self, node: ast.AST, construct: str, text: str) -> None:
        line = getattr(node, "lineno", 0)
        if (line, construct) not in self._seen:
            self._seen.add((line, construct))
            self.warnings.append({"line": line, "construct": construct, "text": text})

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name an expression refers to, through the file's imports; None if unknown."""
        parts = _dotted(node)
        if parts is None or parts[0] not in self.aliases:
            return None
        return ".".join([self.aliases[parts[0]], *parts[1:]])

    # -- imports --------------------------------------------------------------------------
    def _imported(self, node: ast.AST, module: str) -> None:
        hit = _match(module, FLAGGED_MODULES)
        if hit:
            self.warn(node, hit, f"imports {module}: {FLAGGED_MODULES[hit]}")
            return
        hit = _match(module, FLAGGED_NAMES)
        if hit:
            self.warn(node, hit, f"imports {module}: {FLAGGED_NAMES[hit]}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.aliases[top] = top
            self._imported(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:  # relative import: the submission's own package
            return
        for alias in node.names:
            full = f"{node.module}.{alias.name}" if alias.name != "*" else node.module
            self.aliases[alias.asname or alias.name] = full
            self._imported(node, full)

    # -- references -----------------------------------------------------------------------
    def _reference(self, node: ast.AST) -> None:
        name = self.resolve(node)
        if name is None:
            return
        hit = _match(name, FLAGGED_NAMES)
        if hit:
            self.warn(node, hit, f"uses {name}: {FLAGGED_NAMES[hit]}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in FLAGGED_ATTRIBUTES:
            self.warn(node, node.attr, f"uses .{node.attr}: {FLAGGED_ATTRIBUTES[node.attr]}")
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self._patched(node)
        self._reference(node)
        # Only the outermost attribute of a chain is resolved as a whole; inner links are
        # visited for frame attributes and calls, not re-reported as shorter names.
        inner = node.value
        while isinstance(inner, ast.Attribute):
            if inner.attr in FLAGGED_ATTRIBUTES:
                self.warn(inner, inner.attr, f"uses .{inner.attr}: {FLAGGED_ATTRIBUTES[inner.attr]}")
            inner = inner.value
        self.visit(inner)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "__builtins__":
            self.warn(node, "__builtins__", f"uses __builtins__: {FLAGGED_ATTRIBUTES['__builtins__']}")
        self._reference(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id not in self.aliases and func.id in FLAGGED_BUILTINS:
            construct, text = FLAGGED_BUILTINS[func.id]
            self.warn(node, construct, f"calls {func.id}(): {text}")
        if isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and node.args:
            target = self.resolve(node.args[0])
            if target is not None:
                self.warn(node, "monkey-patch",
                          f"{func.id}() on {target}: changes a module other code relies on")
            elif not (isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls")):
                self.warn(node, "setattr",
                          f"{func.id}() on a computed object: can patch any module or class it reaches")
        self.generic_visit(node)

    # -- monkey-patching ------------------------------------------------------------------
    def _patched(self, node: ast.Attribute) -> None:
        name = self.resolve(node)
        if name is not None:
            self.warn(node, "monkey-patch",
                      f"assigns {name}: changes a module or class other code relies on")

    def visit_Subscript(self, node: ast.Subscript) -> None:
        # sys.modules["x"] = …, torch.__dict__["f"] = …
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            name = self.resolve(node.value)
            if name is not None:
                self.warn(node, "monkey-patch",
                          f"assigns into {name}: changes a module or class other code relies on")
        self.generic_visit(node)


def lint_source(source: str) -> list[dict]:
    """Warnings for ``source`` as ``[{"line": int, "construct": str, "text": str}]``, by line.

    A file that does not parse gives a single warning saying so (the run itself will report the
    syntax error as a failure).
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        line = err.lineno or 0
        return [{"line": line, "construct": "syntax error",
                 "text": f"cannot parse the submission: {err.msg} (line {line})"}]
    except ValueError as err:  # e.g. NUL bytes in the source
        return [{"line": 0, "construct": "syntax error", "text": f"cannot parse the submission: {err}"}]
    linter = _Linter()
    # Imports bind names for the whole module, so collect them before looking at uses.
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                linter.aliases[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for alias in node.names:
                if alias.name != "*":
                    linter.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    linter.visit(tree)
    return sorted(linter.warnings, key=lambda w: (w["line"], w["construct"]))


def lint_file(path) -> list[dict]:
    """``lint_source`` on a file's text (read as UTF-8, undecodable bytes replaced)."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        return lint_source(handle.read())
