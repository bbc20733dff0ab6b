"""The variants docs/prepared/run-v60.sh measures, written into scratch/ from scratch/head24.py (the committed entry)
and scratch/v60.py (the committed entry with docs/prepared/v60.diff applied):

- v60w1: v60 with the far update that runs beside a split panel sized to one wave (about 2 programs a
  multiprocessor, not 4), so that the panel's first launch need not wait for a second wave to start;
- slice32, slice128: split slices of 32 / 128 rows (64 now, tuned before v58 shortened the split step);
- v61: the split step takes alpha and sigma by two scalar loads of the folded sums, issued with the loads of d and
  m, instead of picking them out of d and m (a sum over the lanes of a row: three dependent exchanges each on the
  chain of every split launch).  The same numbers, bit for bit."""


def variant(source: str, target: str, old: str, new: str) -> None:
    text = open(f"scratch/{source}.py").read()
    assert text.count(old) == 1, f"scratch/{source}.py is not what {target} expects"
    open(f"scratch/{target}.py", "w").write(text.replace(old, new))


old = "        tiles, chunks, chunk_rows = update_shape(k0, c_begin, c_end)\n"
variant("v60", "v60w1", old, old + "        if lag == 1:\n"
        "            chunks, chunk_rows = _row_chunks(n, k0, batch * tiles, update_programs // 2)\n")
for rows in (32, 128):
    variant("head24", f"slice{rows}", "SPLIT_PANEL_SLICE = 64 ", f"SPLIT_PANEL_SLICE = {rows} ")
variant("head24", "v61", """\
        tau, scale, diagonal, w = _panel_reflector(d, m, j - 1, cols, False)  # d, m loaded: not in P's lanes
""", """\
        tau, scale, diagonal = _reflector(tl.load(previous + j - 1), tl.load(previous + NB + j - 1))  # d[j-1], m[j-1]
        w = d + m * scale
""")
variant("v61", "v61", """\
            tl.store(tau_out + b * n + k0 + cols, tl.broadcast_to(tau[:, None], cols.shape), mask=cols == j - 1)
""", """\
            tl.store(tau_out + b * n + k0 + j - 1, tau)
""")
