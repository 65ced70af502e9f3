"""Reports: what a run's results say, on the terminal and in files.

Runs in kbench's process, during a run (console.py, and the files rewritten as
tasks finish) and afterwards (`kbench report`, `kbench compare`, load_results).
write.py reads a run back (store.py, results.jsonl) and writes results.json,
CSV and Markdown; html.py, junit.py the HTML page and the JUnit file;
compare.py two runs side by side; gate.py the pass/fail policy every report
applies; units.py times in the unit that fits. Needs no GPU and no torch.

May import: records.py, shared/, discover/ (the console's list of tasks).
"""
