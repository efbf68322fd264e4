"""The live check: ask the real assistants every golden question, end to end (`run`),
through an HTTP endpoint or a Python pipeline (`targets`)."""

from abtest.livecheck.run import LiveIncomplete, LiveResult, run_live
from abtest.livecheck.targets import TargetOptions, parse_target

__all__ = ["LiveIncomplete", "LiveResult", "TargetOptions", "parse_target", "run_live"]
