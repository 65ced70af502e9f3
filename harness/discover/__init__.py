"""Discovery: which problems and solutions a run has, and what each problem moves.

Runs in kbench's process (`kbench run`, `kbench list`): folders.py pairs problem
files with solution files and says why a folder gives nothing to run; shapes.py
(with meta_rnn.py) runs a problem on torch's meta device for its shapes, bytes
and FLOPs, in child processes where there are many (facts.py, sizes.py: both
cached by the file's content); demo.py is the CPU demo set of a bare
`kbench run` without a GPU. The judge uses shapes.py too.

May import: records.py, shared/, build/ (its load module, to import a problem file).
"""
