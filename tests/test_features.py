"""Style features of response texts (pydial.features.style), counted by hand on known texts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import pydial

TEXT = """# Answer

Here is **the** plan, with __two__ steps:

1. Read the *data*.
2) Fit the model.
- a bullet
  * a nested bullet

```python
# not a header
- not a list item
print("**not bold**")
```

## Done
"""


def test_one_text_counts_every_feature_and_leaves_code_out():
    f = pydial.features.style(TEXT)
    assert list(f.index) == ["chars", "words", "headers", "list_items", "bold"]
    assert f["words"] == 39  # counted by hand, line by line: 2 + 7 + 4 + 4 + 3 + 4 + 1 + 4 + 5 + 2 + 1 + 2 (code included)
    small = pydial.features.style("ab  c\n\td")
    assert small["chars"] == 8 and small["words"] == 3  # a b space space c newline tab d
    assert f["headers"] == 2  # "# Answer", "## Done"; the code comment is left out
    assert f["list_items"] == 4  # "1.", "2)", "-", nested "*"
    assert f["bold"] == 2  # **the**, __two__; the quoted span in code is left out


@pytest.mark.parametrize("text, headers, items, bold", [
    ("", 0, 0, 0),
    ("#no space is not a header\n####### seven is not a header", 0, 0, 0),
    ("** not bold ** and *italic* and a*b*c", 0, 0, 0),
    ("-no space\n+ plus item\n10. ten", 0, 2, 0),
    ("**a** **b**\n__c__", 0, 0, 3),
    ("~~~\n# in a tilde fence\n~~~\n### after it", 1, 0, 0),
])
def test_edge_cases(text, headers, items, bold):
    f = pydial.features.style(text)
    assert (f["headers"], f["list_items"], f["bold"]) == (headers, items, bold)


def test_a_column_gives_one_row_per_response_with_the_side_suffix_and_its_index():
    col = pd.Series(["short", TEXT, "- one\n- two"], index=[10, 11, 12])
    tab = pydial.features.style(col, suffix="_a")
    assert list(tab.columns) == ["chars_a", "words_a", "headers_a", "list_items_a", "bold_a"]
    assert list(tab.index) == [10, 11, 12] and all(dt == np.int64 for dt in tab.dtypes)
    np.testing.assert_array_equal(tab.loc[11].to_numpy(), pydial.features.style(TEXT).to_numpy())
    assert tab.loc[12, "list_items_a"] == 2 and tab.loc[10, "words_a"] == 1
    assert list(pydial.features.style(["a b", "c"]).index) == [0, 1]


def test_missing_texts_are_a_data_error_naming_their_rows():
    col = pd.Series(["ok", None, np.nan, 3], index=["r1", "r2", "r3", "r4"])
    with pytest.raises(pydial.DataError, match=r"3 row\(s\).*rows r2, r3, r4"):
        pydial.features.style(col)


FRAME = pd.DataFrame({"words_a": [10, 40, 5, 0], "words_b": [30, 20, 5, 0],
                      "bold_a": [0, 2, 1, 3], "bold_b": [1, 0, 1, 0]}, index=["r1", "r2", "r3", "r4"])


def test_difference_covariates_are_divided_by_their_root_mean_square_and_the_scale_reported():
    z, scale = pydial.features.comparison_covariates(FRAME, ["words", "bold"])
    # words_a - words_b = (-20, 20, 0, 0): mean square 800 / 4; bold: (-1, 2, 0, 3), mean square 14 / 4
    assert scale["words"] == pytest.approx(np.sqrt(200.0)) and scale["bold"] == pytest.approx(np.sqrt(3.5))
    np.testing.assert_allclose(z["words"], np.array([-20.0, 20.0, 0.0, 0.0]) / np.sqrt(200.0))
    assert list(z.index) == list(FRAME.index) and list(z.columns) == ["words", "bold"]


def test_normalized_differences_follow_lmarena_and_swap_sign_with_the_sides():
    z, scale = pydial.features.comparison_covariates(FRAME, ["words"], transform="normalized")
    raw = np.array([-20 / 40, 20 / 60, 0.0, 0.0])  # (a - b)/(a + b), 0 when both are 0
    np.testing.assert_allclose(z["words"] * scale["words"], raw)
    swapped = FRAME.rename(columns={"words_a": "words_b", "words_b": "words_a"})
    z2, _ = pydial.features.comparison_covariates(swapped, ["words"], transform="normalized")
    np.testing.assert_allclose(z2["words"], -z["words"])


@pytest.mark.parametrize("change, match", [
    (lambda f: f.drop(columns="bold_b"), r"missing covariate column\(s\) \['bold_b'\]"),
    (lambda f: f.assign(bold_a=[0, None, 1, 3]), r"missing values in covariate column 'bold_a' at rows \[r2\]"),
    (lambda f: f.assign(bold_b=["1", "x", 1, "y"]), r"non-numeric values in covariate column 'bold_b' at rows \[r2, r4\]"),
    (lambda f: f.assign(bold_a=[0, np.inf, 1, 3]), r"infinite values in covariate column 'bold_a' at rows \[r2\]"),
    (lambda f: f.assign(bold_a=[1, 1, 1, 1], bold_b=[0, 0, 0, 0]), r"covariate 'bold' is constant"),
])
def test_bad_covariates_are_a_data_error_naming_the_column_and_rows(change, match):
    with pytest.raises(pydial.DataError, match=match):
        pydial.features.comparison_covariates(change(FRAME), ["words", "bold"])


def test_negative_features_cannot_be_normalized_and_arguments_are_checked():
    with pytest.raises(pydial.DataError, match=r"negative values in covariate 'words'.*rows \[r1\]"):
        pydial.features.comparison_covariates(FRAME.assign(words_a=[-1, 40, 5, 0]), ["words"], transform="normalized")
    with pytest.raises(pydial.ArgumentError, match="transform"):
        pydial.features.comparison_covariates(FRAME, ["words"], transform="ratio")
    with pytest.raises(pydial.ArgumentError, match="distinct"):
        pydial.features.comparison_covariates(FRAME, ["words", "words"])
