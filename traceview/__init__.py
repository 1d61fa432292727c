"""traceview: analyse saved PyTorch profiler traces as exact, linked pandas DataFrames."""
from .errors import RuleError, TraceReadError, TraceviewError
from .load import load
from .model import Trace
from .api import compare, diff
from .classify import classify

__version__ = "0.1.0"

__all__ = ["load", "classify", "Trace", "diff", "compare", "TraceviewError", "TraceReadError", "RuleError", "__version__"]
