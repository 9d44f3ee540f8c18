"""The only place results become text: tables, JSON, CSV, Markdown (one module per command).

`kvplan.report(...)` is also the Python API's per-SKU report (kvplan.api.report): the package
shares that name, so once it is imported it answers the call itself, the same function.
"""

import sys
from types import ModuleType
from typing import Any


class _ReportPackage(ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from kvplan.api import report

        return report(*args, **kwargs)


sys.modules[__name__].__class__ = _ReportPackage
