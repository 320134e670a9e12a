"""The README's quick start runs as written, and its claims about the result hold."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_quick_start_runs_as_written(capsys):
    """Execute the quick start; DIAL-Ada selects a finite weight and the calibration test rejects (as the text says)."""
    blocks = _python_blocks()
    assert blocks, "README.md has no python block"
    namespace: dict = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)
    res, anc = namespace["res"], namespace["anc"]
    assert 0.2 < res.lambda_ < 0.5  # "about 0.35"
    assert res.calibration_test.p_value < 0.05 and anc.problems  # DIAL-Anc's restriction is rejected and says so
    assert 1.7 < res.position_effects.loc["gpt-3.5-turbo", "b"] < 2.1  # "b about 1.9"
