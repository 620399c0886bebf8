"""The threaded client is generated from the asyncio one (tools/unasync.py):
the committed fencing/lease.py must be exactly what the tool writes, so no
hand edit of it, nor an edit of aio.py without a regeneration, goes in."""

import pathlib
import subprocess
import sys

import pytest

TOOL = pathlib.Path(__file__).resolve().parent.parent / "tools" / "unasync.py"


def test_lease_py_is_generated_from_aio_py():
    if not TOOL.exists():
        pytest.skip("not a source tree")
    result = subprocess.run([sys.executable, str(TOOL), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_check_fails_on_a_hand_edit(tmp_path, monkeypatch):
    sys.path.insert(0, str(TOOL.parent))
    try:
        import unasync
    finally:
        sys.path.pop(0)
    source = unasync.SOURCE.read_text()
    generated = unasync.generate(source)
    assert "await " not in generated and "async def" not in generated
    assert "from . import _sync_compat as _compat" in generated
    edited = tmp_path / "lease.py"
    edited.write_text(generated + "# a hand edit\n")
    monkeypatch.setattr(unasync, "TARGET", edited)
    assert unasync.main(["unasync", "--check"]) == 1
    edited.write_text(generated)
    assert unasync.main(["unasync", "--check"]) == 0


def test_an_untranslatable_construct_is_refused():
    sys.path.insert(0, str(TOOL.parent))
    try:
        import unasync
    finally:
        sys.path.pop(0)
    with pytest.raises(SystemExit, match="asyncio construct"):
        unasync.generate('"""doc"""\nimport asyncio\n')
