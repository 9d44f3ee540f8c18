"""Every `$ kvplan …` example in docs/*.md, docs/commands/*.md and README.md prints what the
page shows.

tests/docs_examples.py finds, runs and compares them (and rewrites the pages:
`python tests/docs_examples.py`). An abridged example (`<!-- abridged -->` before its fence)
must show real lines in their real order; one marked `<!-- not run: REASON -->` is skipped
with that reason.
"""

from __future__ import annotations

import pytest
from docs_examples import COMMAND_PAGES, PAGES, differences, examples

EXAMPLES = [example for page in PAGES for example in examples(page)]


def test_every_command_page_has_examples():
    pages_with_examples = {example.page.name for example in EXAMPLES}
    assert {page.name for page in COMMAND_PAGES} <= pages_with_examples


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda example: example.name)
def test_example_prints_what_the_page_shows(example, tmp_path):
    if example.skipped:
        pytest.skip(example.skipped)
    problems = differences(example, tmp_path)
    assert not problems, "\n".join(problems)
