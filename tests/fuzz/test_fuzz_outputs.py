"""Output paths: a bad `-o` is one line, a good one gets the whole file, nothing half-written.

`import-hf -o`, `report --plot` and `verify --json` all write through
`kvplan.files.write_atomically`; the command line is fuzzed through `import-hf -o` (the one
writer that needs no matplotlib or torch) and the function itself for the rest.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from fuzz_corpus import ROOT, bad_output_paths
from fuzz_harness import assert_accepted, assert_clean, assert_refused, cli, fuzz
from hypothesis import given
from hypothesis import strategies as st

from kvplan.errors import KvplanError
from kvplan.files import write_atomically

CONFIG = str(ROOT / "tests" / "fixtures" / "hf" / "llama-3.1-8b")


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob(".kvplan-*.tmp")]


def test_bad_output_paths_are_one_line(tmp_path):
    for path in bad_output_paths(tmp_path):
        outcome = cli("import-hf", CONFIG, "-o", path)
        assert_refused(outcome, "--output ")
    assert _leftovers(tmp_path) == []
    assert (tmp_path / "afile").read_text() == "not a folder\n"
    # Nothing was put in place of what the refused paths named.
    assert stat.S_ISFIFO((tmp_path / "fifo").lstat().st_mode)
    assert (tmp_path / "readonly.yaml").read_text() == "keep\n"
    assert (tmp_path / "dangling").is_symlink() and not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda p: os.mkfifo(p), "is a named pipe; kvplan writes only regular files"),
        (lambda p: (p.write_text("keep\n"), p.chmod(0o444)), "not writable (mode 444)"),
        (lambda p: p.symlink_to(p.parent / "nowhere"), "a symlink to a missing file"),
    ],
    ids=["fifo", "read-only", "dangling-symlink"],
)
def test_only_regular_files_are_replaced(tmp_path, make, fragment):
    target = tmp_path / "m.yaml"
    make(target)
    before = target.lstat()
    assert_refused(cli("import-hf", CONFIG, "-o", str(target)), fragment)
    after = target.lstat()
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert _leftovers(tmp_path) == []


def test_a_symlink_is_written_through(tmp_path):
    real = tmp_path / "real.yaml"
    real.write_text("old\n")
    real.chmod(0o640)
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    assert_accepted(cli("import-hf", CONFIG, "-o", str(link)))
    assert link.is_symlink()  # the link stays; the file it names gets the YAML, keeping its mode
    assert real.read_text() == cli("import-hf", CONFIG).stdout
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


def test_the_function_refuses_a_fifo_too(tmp_path):
    os.mkfifo(tmp_path / "p")
    with pytest.raises(KvplanError, match="p: is a named pipe"):
        write_atomically(tmp_path / "p", "x")


def test_bad_plot_path_is_refused_before_any_output(tmp_path):
    (tmp_path / "afile").write_text("")
    outcome = cli(
        "report", "--model", "gpt2", "--sku", "h100-sxm", "--plot", str(tmp_path / "afile/x.svg")
    )
    assert_refused(outcome, "is not a folder")
    assert outcome.stdout == ""


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "not a file name"),
        (".", "is a folder; give a file name"),
        ("adir", "is a folder; give a file name"),
        ("afile/m.yaml", "is not a folder"),
        ("missing/m.yaml", "no folder"),
        ("x" * 300, "cannot write: File name too long"),
    ],
)
def test_output_refusals_say_why(tmp_path, name, fragment):
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("")
    path = str(tmp_path / name) if name else ""
    assert_refused(cli("import-hf", CONFIG, "-o", path), fragment)


def test_good_output_is_whole_and_readable(tmp_path):
    target = tmp_path / ("m" * 250 + ".yaml")  # a long but legal name: the temporary is short
    target.write_text("old\n")
    outcome = cli("import-hf", CONFIG, "-o", str(target))
    assert_accepted(outcome)
    printed = cli("import-hf", CONFIG)
    assert target.read_text() == printed.stdout
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~_umask()
    assert _leftovers(tmp_path) == []


_NAME_CHARS = "abcXYZ09-_. é日\t/\\*?:"
_PARTS = st.one_of(
    st.text(_NAME_CHARS, max_size=40), st.sampled_from(["..", ".", "", "x" * 256, "-", "~"])
)


@fuzz(20)
@given(parts=st.lists(_PARTS, min_size=1, max_size=3))
def test_fuzzed_output_paths(tmp_path_factory, parts):
    folder = tmp_path_factory.mktemp("out")
    path = os.path.join(folder, *parts)
    outcome = cli("import-hf", CONFIG, "-o", path)
    assert_clean(outcome)
    if outcome.exit_code == 0:
        assert "\nname: llama-3.1-8b\n" in Path(path).read_text()
    assert _leftovers(folder) == []


def test_a_failed_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "plot.svg"
    target.write_text("old picture\n")

    def fails_half_way(temporary: Path) -> None:
        temporary.write_text("half a pic")
        raise OSError(28, "No space left on device")

    with pytest.raises(KvplanError, match=r"--plot .*plot.svg: cannot write: No space left"):
        write_atomically(target, fails_half_way, "--plot")
    assert target.read_text() == "old picture\n"
    assert _leftovers(tmp_path) == []


def test_an_interrupted_write_leaves_nothing(tmp_path):
    def interrupted(temporary: Path) -> None:
        temporary.write_text("partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomically(tmp_path / "record.json", interrupted, "--json")
    assert list(tmp_path.iterdir()) == []


def _umask() -> int:
    # The kernel reports the process's mask in /proc/self/status ("Umask:\t0022").
    line = next(
        x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("Umask")
    )
    return int(line.split()[1], 8)


def test_verify_json_path_is_checked_before_any_work(tmp_path):
    os.mkfifo(tmp_path / "record.json")
    outcome = cli("verify", "gpt2", "--device", "cpu", "--json", str(tmp_path / "record.json"))
    assert_refused(outcome, "--json ", "is a named pipe; kvplan writes only regular files")
    assert outcome.stdout == ""
    assert stat.S_ISFIFO((tmp_path / "record.json").lstat().st_mode)
