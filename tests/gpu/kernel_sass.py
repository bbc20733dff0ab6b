"""Offline: what one of an entry's kernels compiles to for sm_90, without a GPU (not collected by pytest).

    python tests/gpu/kernel_sass.py ENTRY.py KERNEL --pointers A,B,... [--const NAME=VALUE ...]
        [--descriptor NAME=TYPE[SHAPE] ...] [--warps W] [--unaligned NAME,...] [--max-registers R] [--stages S]
        [--out DIR]

Compiles ``ENTRY.KERNEL`` with ``triton.compile`` for sm_90 (the H100 and H200) and prints its registers and
stack (``cuobjdump -res-usage``), the shared memory a program of its launch takes (Triton's figure: the pipelined
loads' stages and the reductions' scratch), its SASS instruction count and mix, each loop's body (a backward
branch over more than 64 instructions) with its own mix, and the layouts of its TTGIR.  The arguments named by
--pointers are float32 pointers (another element type as NAME:TYPE: ``counters:i32``, ``V_in:bf16``), the
others 32-bit integers unless --const gives them (ints, True / False; a constexpr with a default keeps it) or --descriptor names them as host tensor
descriptors (``C_desc=fp32[1,32,64]``: element type and block shape).  A launch specializes pointers that are
16-byte aligned and integers divisible by 16, and both change the code (vectorized loads, the register layout),
so every pointer and integer is marked so here but those named by --unaligned.  With --out, the SASS, PTX and
TTGIR go to DIR.  Needs only Triton's NVIDIA backend (its bundled ptxas and cuobjdump), so it runs on a CPU
machine; the numbers are the installed Triton's, which may differ from the GPU machine's release.

Example (the first panel of n512 b640, as a launch compiles it):

    python tests/gpu/kernel_sass.py submission.py _factor_panel \\
        --pointers src,H,tau_out,T_out,V_out:bf16,counters:i32 --const ROWS=512 --const TILES=1 --const NB=32 \\
        --const V_WIDTH=64 --const WRITE_T=True --const SHUFFLE=True --const BF16X3=True --const FLAGS=True \\
        --const PDL=True --warps 4
"""

import argparse
import collections
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from kernel_bench import load_module  # noqa: E402  (this script's folder is on the path)

INSTRUCTION = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
LOOP_MIN = 64  # a backward branch over fewer instructions is a wait or a small loop, not reported


def constant(text: str):
    """An int, True or False from --const's text; None for anything else."""
    if text in ("True", "False"):
        return text == "True"
    try:
        return int(text)
    except ValueError:
        return None


def opcode(instruction: str) -> str:
    """The opcode of one SASS instruction, its predicate and modifiers dropped (``@!P0 FADD.FTZ`` -> ``FADD``)."""
    return re.sub(r"^@!?U?P[T\d]+\s+", "", instruction).split()[0].split(".")[0]


def mix(instructions: list[str], top: int = 12) -> str:
    return ", ".join(f"{name} {count}" for name, count in collections.Counter(map(opcode, instructions)).most_common(top))


def loops(instructions: list[tuple[int, str]]) -> list[tuple[int, int, list[str]]]:
    """(start, end, body) of every backward branch over more than LOOP_MIN instructions."""
    found = []
    for address, text in instructions:
        target = re.search(r"\bBRA\s+(?:`\(\.L_x_\d+\)\s*)?(0x[0-9a-f]+)", text)
        if target and int(target.group(1), 16) < address:
            start = int(target.group(1), 16)
            body = [t for a, t in instructions if start <= a <= address]
            if len(body) > LOOP_MIN:
                found.append((start, address, body))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("entry")
    parser.add_argument("kernel")
    parser.add_argument("--pointers", required=True, help="pointer arguments, comma-separated (NAME or NAME:i32)")
    parser.add_argument("--const", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--warps", type=int, default=4)
    parser.add_argument("--descriptor", action="append", default=[], metavar="NAME=TYPE[SHAPE]")
    parser.add_argument("--unaligned", default="", help="arguments not to mark 16-aligned / divisible by 16")
    parser.add_argument("--max-registers", type=int, default=None)
    parser.add_argument("--stages", type=int, default=None, help="num_stages (Triton's default: 3)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    fn = getattr(load_module(args.entry), args.kernel, None)
    if fn is None or not hasattr(fn, "arg_names"):
        parser.error(f"{args.entry} has no Triton kernel named {args.kernel}")
    names = list(fn.arg_names)
    constexprs = {p.name: p.default for p in fn.params if p.is_constexpr and p.has_default}  # unless --const
    for item in args.const:
        name, _, value = item.partition("=")
        if name not in names or not value:
            parser.error(f"--const {item}: expected NAME=VALUE with NAME one of {', '.join(names)}")
        constexprs[name] = constant(value)
        if constexprs[name] is None:
            parser.error(f"--const value {value!r} is neither an int nor True / False")
    pointers = {}
    for item in filter(None, args.pointers.split(",")):
        name, _, kind = item.partition(":")
        if name not in names:
            parser.error(f"--pointers: {name} is not an argument of {args.kernel} ({', '.join(names)})")
        pointers[name] = f"*{kind or 'fp32'}"
    for item in args.descriptor:
        name, _, kind = item.partition("=")
        if name not in names or not re.fullmatch(r"\w+\[[\d,]+\]", kind):
            parser.error(f"--descriptor {item}: expected NAME=TYPE[SHAPE] (C_desc=fp32[1,32,64]) with NAME one of "
                         f"{', '.join(names)}")
        pointers[name] = f"tensordesc<{kind}>"
    unaligned = set(filter(None, args.unaligned.split(","))) | {name for name in pointers
                                                                 if pointers[name].startswith("tensordesc")}
    signature = {name: "constexpr" if name in constexprs else pointers.get(name, "i32") for name in names}
    attrs = {(names.index(name),): [["tt.divisibility", 16]] for name in names
             if name not in constexprs and name not in unaligned}
    options = dict(num_warps=args.warps)
    if args.max_registers is not None:
        options["maxnreg"] = args.max_registers
    if args.stages is not None:
        options["num_stages"] = args.stages
    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    if not (tools / "cuobjdump").exists():
        parser.error(f"this Triton ({triton.__version__}) has no bundled cuobjdump in {tools}")
    try:
        compiled = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
                                  target=GPUTarget("cuda", 90, 32), options=options)
    except Exception as error:  # a missing constexpr, a wrong type: Triton's message, without its traceback
        while error.__cause__ is not None:  # Triton wraps the reason (in a called function) in its caller's error
            error = error.__cause__
        lines = [line for line in str(error).strip().splitlines() if line.strip()]
        parser.exit(1, f"kernel_sass.py: {args.kernel} did not compile: {type(error).__name__}: "
                       f"{lines[-1] if lines else ''}\n")
    with tempfile.TemporaryDirectory() as scratch:
        cubin = Path(scratch) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        usage = subprocess.run([tools / "cuobjdump", "-res-usage", cubin], capture_output=True, text=True,
                               check=True).stdout
        sass = subprocess.run([tools / "cuobjdump", "-sass", cubin], capture_output=True, text=True,
                              check=True).stdout
    instructions = [(int(m.group(1), 16), m.group(2)) for m in map(INSTRUCTION.match, sass.splitlines()) if m]
    resources = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+)", usage)
    print(f"{args.kernel} (Triton {triton.__version__}, sm_90, {args.warps} warps): "
          f"{resources.group(1)} registers, {resources.group(2)} bytes of stack, {compiled.metadata.shared} bytes of "
          f"shared memory a program ({resources.group(3)} static); {len(instructions)} SASS instructions")
    print(f"  all: {mix([text for _, text in instructions])}")
    for start, end, body in loops(instructions):
        print(f"  loop {start:#x}-{end:#x}, {len(body)} instructions: {mix(body)}")
    for layout in sorted(set(re.findall(r"^(#\w+) = (#ttg\.\w+<.*>)$", compiled.asm["ttgir"], re.MULTILINE))):
        print(f"  layout {layout[0]} = {layout[1]}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        for suffix, text in (("sass", sass), ("ptx", compiled.asm["ptx"]), ("ttgir", compiled.asm["ttgir"])):
            (args.out / f"{args.kernel}.{suffix}").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
