"""A solution's Triton kernels kept between its tasks (harness/judge/triton_cache.py): the
judge seeds the candidate's Triton cache from the solution's entry and keeps what the
candidate's Triton wrote as that entry, read as untrusted data."""
import os

from harness.judge import triton_cache


def _triton_wrote(scratch, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = scratch / "triton" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


KERNEL = {"AbC123/add_kernel.cubin": b"\x7fELF...", "AbC123/add_kernel.json": b"{}",
          "AbC123/__grp__add_kernel.json": b'{"child_paths": {}}'}


def test_what_a_task_compiled_seeds_the_next_tasks_candidate(tmp_path):
    first, second, store = tmp_path / "c1", tmp_path / "c2", tmp_path / "triton" / "entry"
    _triton_wrote(first, KERNEL)
    assert triton_cache.keep(str(store), str(first)) == "kept 3 files"
    second.mkdir()
    assert triton_cache.seed(str(store), str(second)) == 3
    for rel, data in KERNEL.items():
        assert (second / "triton" / rel).read_bytes() == data


def test_an_entry_is_made_once_and_never_replaced(tmp_path):
    first, other, store = tmp_path / "c1", tmp_path / "c2", tmp_path / "entry"
    _triton_wrote(first, KERNEL)
    triton_cache.keep(str(store), str(first))
    _triton_wrote(other, {"AbC123/add_kernel.cubin": b"something else"})
    assert triton_cache.keep(str(store), str(other)) == "nothing to keep"
    assert (store / "AbC123" / "add_kernel.cubin").read_bytes() == KERNEL["AbC123/add_kernel.cubin"]


def test_links_odd_names_deep_folders_and_too_much_are_not_kept(tmp_path, monkeypatch):
    secret = tmp_path / "secret"
    secret.write_bytes(b"not the candidate's")
    cases = {
        "link": lambda s: os.symlink(secret, s / "triton" / "AbC123" / "x.cubin"),
        "name": lambda s: (s / "triton" / "AbC123" / "a b;rm").write_bytes(b"x"),
        "deep": lambda s: (s / "triton" / "AbC123" / "tmp.pid_1").mkdir(),
        "fifo": lambda s: os.mkfifo(s / "triton" / "AbC123" / "pipe"),
    }
    for name, plant in cases.items():
        scratch = tmp_path / name
        _triton_wrote(scratch, KERNEL)
        plant(scratch)
        store = tmp_path / f"entry-{name}"
        assert triton_cache.keep(str(store), str(scratch)) == "nothing to keep", name
        assert not store.exists()
    monkeypatch.setattr(triton_cache, "MAX_BYTES", 10)
    scratch = tmp_path / "big"
    _triton_wrote(scratch, KERNEL)
    assert triton_cache.keep(str(tmp_path / "entry-big"), str(scratch)) == "nothing to keep"


def test_no_entry_named_no_copy(tmp_path):
    _triton_wrote(tmp_path, KERNEL)
    assert triton_cache.keep(None, str(tmp_path)) == "nothing to keep"
    assert triton_cache.seed(None, str(tmp_path)) == 0
    assert triton_cache.seed(str(tmp_path / "absent"), str(tmp_path)) == 0


def test_a_linked_triton_folder_is_neither_read_nor_written(tmp_path):
    """The candidate may replace its Triton folder with a link: to a folder it may not read
    (the judge would read it into the candidate's entry) or one it may not write (the next
    seeding would write there). Neither is followed."""
    secret = tmp_path / "elsewhere"
    _triton_wrote(tmp_path / "x", KERNEL)
    (tmp_path / "x" / "triton").rename(secret)
    scratch = tmp_path / "c1"
    scratch.mkdir()
    os.symlink(secret, scratch / "triton")
    assert triton_cache.keep(str(tmp_path / "entry"), str(scratch)) == "nothing to keep"
    assert not (tmp_path / "entry").exists()
    good = tmp_path / "c2"
    _triton_wrote(good, KERNEL)
    triton_cache.keep(str(tmp_path / "entry"), str(good))
    before = sorted(p.name for p in secret.rglob("*"))
    assert triton_cache.seed(str(tmp_path / "entry"), str(scratch)) == 0
    assert sorted(p.name for p in secret.rglob("*")) == before


def test_a_full_store_keeps_nothing_more(tmp_path, monkeypatch):
    monkeypatch.setattr(triton_cache, "MAX_ENTRIES", 2)
    for i in range(3):
        scratch = tmp_path / f"c{i}"
        _triton_wrote(scratch, KERNEL)
        said = triton_cache.keep(str(tmp_path / "store" / f"entry{i}"), str(scratch))
        assert said == ("the store is full" if i == 2 else "kept 3 files"), (i, said)
