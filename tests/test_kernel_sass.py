"""tests/gpu/kernel_sass.py, the offline sm_90 compile of one kernel, run for real on the entry's register panel.

No GPU is needed: Triton's NVIDIA backend compiles and its bundled cuobjdump reads the result.  The numbers are
the installed Triton's (CI's may be newer than the GPU machine's).
"""

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conftest import load_module

ROOT = Path(__file__).resolve().parents[1]
PANEL = ["submission.py", "_factor_panel", "--pointers", "src,H,tau_out,T_out,V_out:bf16,counters:i32", "--const",
         "ROWS=512", "--const", "TILES=1", "--const", "NB=32", "--const", "V_WIDTH=32", "--const", "WRITE_T=True",
         "--const", "SHUFFLE=True", "--const", "BF16X3=True", "--const", "FLAGS=True", "--const", "PDL=False",
         "--warps", "4"]
UPDATE = ["submission.py", "_panel_update", "--pointers",
          "src,H,tau_in,grams,T_in,T_next,W_in,W_out,V_in:bf16,V_next:bf16,counters:i32", "--const", "NB=32",
          "--const", "V_WIDTH=32", "--const", "TILE_COLS=64", "--const", "TILE_ROWS=32", "--const",
          "CHUNK_ROWS=512", "--const", "NEXT=True", "--const", "BUILD_T=False", "--const", "GRAM=False", "--const",
          "BF16X3=True", "--const", "FLAGS=True", "--const", "PDL=True", "--warps", "4", "--max-registers", "168"]


def _run(*args):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compile, do not interpret
    return subprocess.run([sys.executable, str(ROOT / "tests" / "gpu" / "kernel_sass.py"), *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)


def test_the_register_panel_holds_runs_of_four_columns_a_thread_and_shuffles_a_column_from_its_lane(tmp_path):
    done = _run(*PANEL, "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    head, *rest = done.stdout.splitlines()
    assert head.startswith("_factor_panel (Triton ") and "sm_90, 4 warps" in head
    registers, stack = (int(head.split(": ")[1].split(" registers")[0]),
                        int(head.split(" registers, ")[1].split(" bytes")[0]))
    assert 0 < registers <= 255 and stack <= 256  # the design's budget: a few spilled registers at most
    # What the reflector loop relies on: 4 consecutive columns per thread (its column selections, docs/perf.md
    # v39), the panel held as [rows, 8, 4] with a row's 8 runs in 8 consecutive lanes (_from_lane's shuffle).
    assert any("sizePerThread = [1, 4]" in line and "threadsPerWarp = [4, 8]" in line for line in rest), done.stdout
    assert any("sizePerThread = [1, 1, 4]" in line and "threadsPerWarp = [4, 8, 1]" in line
               and "order = [2, 1, 0]" in line for line in rest), done.stdout
    assert "shfl.sync.idx.b32" in (tmp_path / "_factor_panel.ptx").read_text()
    loops = [line for line in rest if line.startswith("  loop ")]
    assert loops and all("SHFL" in line for line in loops)  # the reflector loop, with its exchanges between lanes
    assert {p.name for p in tmp_path.iterdir()} == {"_factor_panel.sass", "_factor_panel.ptx", "_factor_panel.ttgir"}


def test_the_panel_layout_is_the_same_with_and_without_SHUFFLE_and_follows_from_no_specialization():
    # SHUFFLE marks the panel's pointers 16-byte aligned, and V's parts are always stored through the same marks:
    # even where Triton proved nothing of the arguments (n, the pointers and k0 not specialized) the tile is held
    # in runs of 4 columns as _from_lane needs, and the same with SHUFFLE off (the column is summed there), so a
    # panel is factored the same way, sum for sum, either way (tests/gpu/test_panel_shuffle.py compares the bits).
    def layouts(shuffle):
        args = [arg if arg != "SHUFFLE=True" else f"SHUFFLE={shuffle}" for arg in PANEL]
        done = _run(*args, "--unaligned", "n,src,H,k0")
        assert done.returncode == 0, done.stderr
        return [line for line in done.stdout.splitlines() if line.startswith("  layout ")]

    def runs_of_four(lines):
        return (any("sizePerThread = [1, 4]" in line and "threadsPerWarp = [4, 8]" in line for line in lines)
                and any("sizePerThread = [1, 1, 4]" in line and "threadsPerWarp = [4, 8, 1]" in line
                        and "order = [2, 1, 0]" in line for line in lines))

    marked, unmarked = layouts(True), layouts(False)
    assert runs_of_four(marked), marked
    assert runs_of_four(unmarked), unmarked


def test_every_register_panel_shape_the_host_launches_keeps_the_shuffle_layout():
    # _from_lane takes a column from the lane that holds it, so every panel tile must be held as a row of W // 4
    # runs of 4 columns in consecutive lanes, whatever else the kernel loads or stores (a block of another
    # access's shape can hand the tiles its own layout: docs/perf.md, "v81 measured"). Each (width, tile rows,
    # warps) that _factor_blocked launches, at its largest count of tiles, compiled as a launch would (SHUFFLE on).
    sub = load_module(ROOT / "submission.py", "submission_shapes")

    shapes = {}
    for width, floats in ((sub.NARROW_PANEL_WIDTH, sub.PANEL_FLOATS_PER_THREAD_LATENCY),
                          (sub.PANEL_WIDTH, sub.PANEL_FLOATS_PER_THREAD_OWN_SM),
                          (sub.PANEL_WIDTH, sub.PANEL_FLOATS_PER_THREAD_SHARED)):
        for rows in range(1, sub.MAX_REGISTER_PANEL_ROWS + 1):
            tiles, tile, warps = sub._panel_tiles(rows, width, floats)
            shapes[width, tile, warps] = max(tiles, shapes.get((width, tile, warps), 0))
    assert len(shapes) > 10, shapes

    def compile_panel(shape):
        (width, tile, warps), tiles = shape
        values = {"ROWS=512": f"ROWS={tile}", "TILES=1": f"TILES={tiles}", "NB=32": f"NB={width}",
                  "V_WIDTH=32": f"V_WIDTH={width}"}
        return _run(*[values.get(arg, arg) for arg in PANEL[:-1]], str(warps))

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        compiled = list(pool.map(compile_panel, shapes.items()))
    for ((width, tile, warps), tiles), done in zip(shapes.items(), compiled):
        assert done.returncode == 0, done.stderr
        runs = width // 4
        lines = done.stdout.splitlines()
        assert any("sizePerThread = [1, 1, 4]" in line and f"threadsPerWarp = [{32 // runs}, {runs}, 1]" in line
                   and "order = [2, 1, 0]" in line for line in lines), (width, tile, warps, tiles, lines)


def test_the_update_takes_a_row_step_of_shared_memory_per_pipeline_stage():
    # The figure that limits programs a multiprocessor is the launch's shared memory (Triton's, not cuobjdump's
    # static count): each stage of the row loop's copies holds a step's C (32 x 64 floats) and the bf16 parts of
    # V and V1 (2 x 2 x 32 x 32), 16 KiB.
    def shared(stages):
        done = _run(*UPDATE, "--stages", str(stages))
        assert done.returncode == 0, done.stderr
        head = done.stdout.splitlines()[0]
        return int(head.split(" bytes of shared memory a program")[0].rsplit(" ", 1)[1])

    two, four = shared(2), shared(4)
    assert two >= 16384 and four - two >= 2 * 16384, (two, four)


def test_bad_arguments_are_one_line_errors():
    done = _run("submission.py", "_factor_panel", "--pointers", "src,Q")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--pointers: Q is not an argument of _factor_panel (src, H," in done.stderr
    done = _run("submission.py", "_no_such_kernel", "--pointers", "src")
    assert done.returncode == 2 and "submission.py has no Triton kernel named _no_such_kernel" in done.stderr
    done = _run(*PANEL[:2], "--pointers", "src", "--const", "ROWS=many")
    assert done.returncode == 2 and "--const value 'many' is neither an int nor True / False" in done.stderr
    done = _run(*PANEL[:4], "--const", "ROWS=512")  # NB and the flags not given: Triton cannot compile it
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("kernel_sass.py: _factor_panel did not compile: ")
    # An error inside a function the kernel calls reports its reason, not the caller's source line: V's parts
    # given as float32 where the products take bfloat16 parts.
    done = _run(*[arg.replace("V_in:bf16,V_next:bf16", "V_in,V_next") for arg in UPDATE])
    assert done.returncode == 1 and "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("kernel_sass.py: _panel_update did not compile: ") and "dtype" in last, last
