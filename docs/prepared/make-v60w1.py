"""scratch/v60w1.py from scratch/v60.py: the far update that runs beside a split panel sized to one wave (about 2
programs a multiprocessor, not 4), so that the panel's first launch need not wait for a second wave to start."""

s = open("scratch/v60.py").read()
old = "        tiles, chunks, chunk_rows = update_shape(k0, c_begin, c_end)\n"
assert s.count(old) == 1, "scratch/v60.py is not v60"
s = s.replace(old, old + "        if lag == 1:\n"
              "            chunks, chunk_rows = _row_chunks(n, k0, batch * tiles, update_programs // 2)\n")
open("scratch/v60w1.py", "w").write(s)
