"""`kvplan explain`: an engine's startup log read back and reproduced term by term.

    report = explain_log(lines, Given(sku="h100-sxm"))

One reader per engine (vllm, sglang, trtllm, llamacpp, ollama) fills the common Reading;
`rebuild` turns it into a deployment through kvplan's API; `compare` puts each logged
number beside kvplan's with the term that accounts for a difference; `target` answers
"what serves N requests of L tokens" with kvplan's recommend search.
"""

from kvplan.explain.explain import explain_log, read_log
from kvplan.explain.rebuild import Given
from kvplan.explain.result import ExplainReport, ExplainRow, TargetAnswer

__all__ = ["ExplainReport", "ExplainRow", "Given", "TargetAnswer", "explain_log", "read_log"]
