"""`eagle3-nb notebooks DIR`: the packaged notebooks copied out for Jupyter, into a new
directory only, and runnable from there on the bundled samples."""

import json

from eagle3_nb.io.resources import notebooks_dir


def test_copies_the_notebooks_into_a_new_directory(run_cli, tmp_path):
    dest = tmp_path / "my-notebooks"
    rc, out, err = run_cli("notebooks", dest)
    assert rc == 0, err
    names = sorted(p.name for p in dest.iterdir())
    assert names == sorted(p.name for p in notebooks_dir().glob("[0-9][0-9]_*.ipynb"))
    assert len(names) == 6
    for name in names:
        assert (dest / name).read_bytes() == (notebooks_dir() / name).read_bytes()
        json.loads((dest / name).read_text())
    assert str(dest) in out
    assert [p.name for p in tmp_path.iterdir()] == ["my-notebooks"]   # no staging left behind


def test_never_writes_into_an_existing_directory(run_cli, tmp_path):
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me")
    rc, out, err = run_cli("notebooks", dest)
    assert rc == 2 and "exists" in err and "Traceback" not in err
    assert [p.name for p in dest.iterdir()] == ["notes.txt"]
    rc, _, err = run_cli("notebooks", tmp_path / "no" / "such" / "parent")
    assert rc == 2 and "parent directory does not exist" in err
